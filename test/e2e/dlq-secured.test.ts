/**
 * `npm run dlq` against a secured cluster: a private broker whose only client listener
 * is SASL_SSL (SCRAM-SHA-512, certificates from a throwaway CA), reached with the same
 * variables a service gets. `list` shows a dead letter and `replay` re-publishes it to
 * its source topic; with the password left out the broker is never reached.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createBus, readTopic } from '@ctxflow/bus';
import { DLQ_HEADERS, TOPICS } from '@ctxflow/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dlqConnectionFromEnv } from '../../scripts/dlq.ts';
import {
  type Certificates,
  makeCertificates,
  type SecuredKafka,
  startSecuredKafka,
} from '../support/secured-services.ts';

const work = mkdtempSync(join(tmpdir(), 'ctxflow-dlq-secured-'));
const prefix = `dlqsec-${randomUUID().slice(0, 8)}.`;
let certs: Certificates;
let kafka: SecuredKafka;

beforeAll(async () => {
  certs = makeCertificates(join(work, 'certs'));
  kafka = await startSecuredKafka(`dlq-secured-${randomUUID().slice(0, 8)}`, certs);
}, 180_000);

afterAll(async () => {
  await kafka?.kafka.stop();
  rmSync(work, { recursive: true, force: true });
});

/** The variables of a service on the SASL_SSL listener, the password in a file. */
function securedEnv(): Record<string, string> {
  const passwordFile = join(work, 'kafka-password');
  writeFileSync(passwordFile, `${kafka.password}\n`);
  return {
    KAFKA_BROKERS: kafka.saslSslBrokers.join(','),
    KAFKA_TOPIC_PREFIX: prefix,
    KAFKA_SSL: 'true',
    KAFKA_SSL_CA_FILE: certs.caFile,
    KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
    KAFKA_SASL_USERNAME: kafka.username,
    KAFKA_SASL_PASSWORD_FILE: passwordFile,
  };
}

async function dlq(env: Record<string, string>, ...args: string[]) {
  return promisify(execFile)(
    process.execPath,
    ['--disable-warning=TimeoutNegativeWarning', 'scripts/dlq.ts', ...args],
    {
      env: { PATH: process.env.PATH ?? '', ...env },
    },
  );
}

describe('npm run dlq on SASL_SSL', () => {
  it("DLQ-SEC6: list and replay over SASL_SSL with the services' variables", async () => {
    const env = securedEnv();
    const connection = dlqConnectionFromEnv(env);
    // The bus prefixes the names it is given (KAFKA_TOPIC_PREFIX); the headers name the topic as the broker does.
    const bus = createBus({ client: 'kafkajs', clientId: 'dlq-secured-test', ...connection });
    const source = `${prefix}${TOPICS.ticketUpdates}`;
    try {
      await bus.admin.ensureTopics([
        { name: TOPICS.ticketUpdates, partitions: 1 },
        { name: TOPICS.ticketUpdatesDlq, partitions: 1 },
      ]);
      await bus.publisher.publish(TOPICS.ticketUpdatesDlq, [
        {
          key: 'ticket-7',
          value: '{"not":"an update"}',
          headers: {
            'ctxflow-record-id': 'rec-7',
            [DLQ_HEADERS.reason]: 'invalid',
            [DLQ_HEADERS.error]: 'source: Required',
            [DLQ_HEADERS.topic]: source,
            [DLQ_HEADERS.partition]: '0',
            [DLQ_HEADERS.offset]: '41',
          },
        },
      ]);
    } finally {
      await bus.publisher.close();
      await bus.admin.close();
    }

    const listed = await dlq(env, 'list', '--topic', 'ticket-updates');
    expect(listed.stdout).toContain(`${source}[0]@41  invalid  pending  key="ticket-7"  error="source: Required"`);
    expect(listed.stdout).toContain('1 dead letter(s)\n');

    const replayed = await dlq(env, 'replay', '--topic', 'ticket-updates');
    expect(replayed.stdout).toContain('1 record(s) replayed\n');
    const onSource = await readTopic({ clientId: 'dlq-secured-read', ...connection }, source);
    expect(onSource.map((r) => ({ key: r.key, value: r.value, headers: r.headers }))).toEqual([
      { key: 'ticket-7', value: '{"not":"an update"}', headers: { 'ctxflow-record-id': 'rec-7' } },
    ]);
    expect((await dlq(env, 'list', '--topic', 'ticket-updates')).stdout).toBe('0 dead letter(s)\n');

    // Without the SASL variables the listener refuses the client: the command fails, printing no secret.
    const { KAFKA_SASL_MECHANISM: _m, KAFKA_SASL_USERNAME: _u, KAFKA_SASL_PASSWORD_FILE: _p, ...tlsOnly } = env;
    const failure = (await dlq(tlsOnly, 'list').then(
      () => new Error('exited 0'),
      (err: unknown) => err,
    )) as { code: number; stderr: string };
    expect(failure.code).toBe(1);
    expect(failure.stderr).toMatch(/^dlq: /);
    expect(failure.stderr).not.toContain(kafka.password);
  }, 120_000);
});
