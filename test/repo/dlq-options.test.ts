/**
 * `npm run dlq` reads the services' Kafka variables with their schema (brokers, topic
 * prefix, KAFKA_SSL*, KAFKA_SASL_*), and the topic reader maps TLS and SASL onto the
 * kafkajs client as the bus does. No broker needed.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { topicReaderConfig } from '@ctxflow/bus';
import { ConfigError } from '@ctxflow/service-kit';
import { afterAll, describe, expect, it } from 'vitest';
import { dlqConnectionFromEnv } from '../../scripts/dlq.ts';

const work = mkdtempSync(join(tmpdir(), 'ctxflow-dlq-options-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(work, name);
  writeFileSync(path, text);
  return path;
}

const CA = '-----BEGIN CERTIFICATE-----\nMIIBdummy\n-----END CERTIFICATE-----\n';
const CERT = '-----BEGIN CERTIFICATE-----\nMIIBclient\n-----END CERTIFICATE-----\n';
const KEY = '-----BEGIN PRIVATE KEY-----\nMIIBkey\n-----END PRIVATE KEY-----\n';
const PASSWORD = 'dlq-secret-password';

/** The problems of a refused environment. */
function problems(env: Record<string, string>): string[] {
  try {
    dlqConnectionFromEnv(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error('accepted');
}

describe("npm run dlq: the services' Kafka variables", () => {
  it('DLQ-SEC1: SASL_SSL (SCRAM-SHA-512, CA and password files) maps to the bus options and the kafkajs client', () => {
    const options = dlqConnectionFromEnv({
      KAFKA_BROKERS: 'kafka-0:9093, kafka-1:9093',
      KAFKA_TOPIC_PREFIX: 'staging.',
      KAFKA_SSL: 'true',
      KAFKA_SSL_CA_FILE: file('ca.crt', CA),
      KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
      KAFKA_SASL_USERNAME: 'ctxflow',
      KAFKA_SASL_PASSWORD_FILE: file('password', `${PASSWORD}\n`),
    });
    expect(options).toEqual({
      brokers: ['kafka-0:9093', 'kafka-1:9093'],
      topicPrefix: 'staging.',
      tls: { ca: CA },
      sasl: { mechanism: 'scram-sha-512', username: 'ctxflow', password: PASSWORD },
    });
    expect(topicReaderConfig({ clientId: 'ctxflow-dlq', ...options })).toMatchObject({
      clientId: 'ctxflow-dlq',
      brokers: ['kafka-0:9093', 'kafka-1:9093'],
      ssl: { ca: CA, rejectUnauthorized: true },
      sasl: { mechanism: 'scram-sha-512', username: 'ctxflow', password: PASSWORD },
    });
  });

  it('DLQ-SEC2: mutual TLS, PLAIN with a password variable, and OAUTHBEARER from a token file', async () => {
    const mtls = dlqConnectionFromEnv({
      KAFKA_BROKERS: 'kafka:9094',
      KAFKA_SSL: '1',
      KAFKA_SSL_CERT_FILE: file('client.crt', CERT),
      KAFKA_SSL_KEY_FILE: file('client.key', KEY),
      KAFKA_SASL_MECHANISM: 'PLAIN',
      KAFKA_SASL_USERNAME: 'ops',
      KAFKA_SASL_PASSWORD: PASSWORD,
    });
    expect(mtls).toEqual({
      brokers: ['kafka:9094'],
      topicPrefix: '',
      tls: { cert: CERT, key: KEY },
      sasl: { mechanism: 'plain', username: 'ops', password: PASSWORD },
    });
    expect(topicReaderConfig({ clientId: 'c', ...mtls }).ssl).toEqual({
      cert: CERT,
      key: KEY,
      rejectUnauthorized: true,
    });

    const tokenFile = file('token', 'first-token\n');
    const oauth = dlqConnectionFromEnv({
      KAFKA_BROKERS: 'kafka:9093',
      KAFKA_SSL: 'true',
      KAFKA_SASL_MECHANISM: 'OAUTHBEARER',
      KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: tokenFile,
    });
    expect(oauth.tls).toEqual({});
    expect(oauth.sasl?.mechanism).toBe('oauthbearer');
    const sasl = topicReaderConfig({ clientId: 'c', ...oauth }).sasl as {
      mechanism: string;
      oauthBearerProvider: () => Promise<{ value: string }>;
    };
    expect(sasl.mechanism).toBe('oauthbearer');
    // Read at every authentication: a rotated token is used.
    writeFileSync(tokenFile, 'rotated-token\n');
    expect(await sasl.oauthBearerProvider()).toEqual({ value: 'rotated-token' });
  });

  it('DLQ-SEC3: plaintext brokers only: no TLS, no SASL', () => {
    const options = dlqConnectionFromEnv({ KAFKA_BROKERS: '127.0.0.1:19092' });
    expect(options).toEqual({ brokers: ['127.0.0.1:19092'], topicPrefix: '' });
    const config = topicReaderConfig({ clientId: 'c', ...options });
    expect(config.ssl).toBeUndefined();
    expect(config.sasl).toBeUndefined();
  });

  it('DLQ-SEC4: what a service refuses is refused, naming each variable', () => {
    expect(problems({})).toEqual(['KAFKA_BROKERS: not set: the dead-letter topics live on Kafka']);
    expect(
      problems({
        KAFKA_BROKERS: 'kafka:9093',
        KAFKA_SSL_CA_FILE: file('ca2.crt', CA),
        KAFKA_SASL_USERNAME: 'ctxflow',
      }),
    ).toEqual([
      'KAFKA_SSL_CA_FILE: set, but KAFKA_SSL is not true',
      'KAFKA_SASL_USERNAME: set, but KAFKA_SASL_MECHANISM is not',
    ]);
    expect(
      problems({ KAFKA_BROKERS: 'kafka:9093', KAFKA_SASL_MECHANISM: 'SCRAM-SHA-256', KAFKA_SASL_USERNAME: 'u' }),
    ).toEqual(['KAFKA_SASL_PASSWORD: required (or KAFKA_SASL_PASSWORD_FILE) with KAFKA_SASL_MECHANISM=SCRAM-SHA-256']);
  });

  it('DLQ-SEC5: the command exits 2 on a refused configuration, naming the variable and never the password', async () => {
    const run = promisify(execFile)(
      process.execPath,
      ['--disable-warning=TimeoutNegativeWarning', 'scripts/dlq.ts', 'list'],
      {
        env: {
          PATH: process.env.PATH,
          KAFKA_BROKERS: 'kafka:9093',
          KAFKA_SASL_USERNAME: 'ctxflow',
          KAFKA_SASL_PASSWORD: PASSWORD,
        },
      },
    );
    const failure = (await run.then(
      () => {
        throw new Error('exited 0');
      },
      (err: unknown) => err,
    )) as { code: number; stdout: string; stderr: string };
    expect(failure.code).toBe(2);
    expect(failure.stdout).toBe('');
    expect(failure.stderr).toBe(
      [
        'dlq: invalid configuration:',
        '  - KAFKA_SASL_USERNAME: set, but KAFKA_SASL_MECHANISM is not',
        '  - KAFKA_SASL_PASSWORD: set, but KAFKA_SASL_MECHANISM is not',
        '',
      ].join('\n'),
    );
    expect(failure.stderr).not.toContain(PASSWORD);
  });
});
