/**
 * Secured connections, end to end: a private broker with a SASL_SSL listener
 * and an SSL listener that requires a client certificate, and redis-server on
 * TLS only with an ACL user (standalone and a Cluster), all made by this file
 * with certificates from a throwaway CA. The options reach the clients the way
 * a service gets them: variables parsed by a service's schema.
 *
 * - the bus contract over SASL_SSL on both clients (SCRAM-SHA-512, SCRAM-SHA-256);
 * - PLAIN, SCRAM-SHA-256/512, OAUTHBEARER and mutual TLS on both clients;
 * - the session-store contract over TLS Redis with the ACL user, standalone and Cluster;
 * - a started service: ready over both, and no password in any line it writes;
 *   a wrong password or an untrusted certificate stops its start naming the variable.
 *
 * Longer than 400 lines: the certificates and private servers it makes once are shared by every case.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createBus, type KafkaClientName } from '@ctxflow/bus';
import { connectRedis, kafkaBusSecurity } from '@ctxflow/service-kit';
import { RedisSessionStore } from '@ctxflow/session-runner';
import { loadStepContextConfig } from '@ctxflow/step-context';
import type { Cluster, Redis } from 'ioredis';
import kafkajs from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysOfSession } from '../../services/step-context/test/helpers.ts';
import { ENTRIES, freePort, serviceEnv, stopAll, waitFor } from '../faults/processes.ts';
import {
  type Certificates,
  makeCertificates,
  type SecuredKafka,
  type SecuredRedis,
  startSecuredKafka,
  startSecuredRedis,
  unsecuredJwt,
} from '../support/secured-services.ts';
import { busContract } from './bus.contract.ts';
import { sessionStoreContract } from './session-store.contract.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'ctxflow-secured-'));
let certs: Certificates;
let kafka: SecuredKafka;
let redis: SecuredRedis;
let redisCluster: SecuredRedis;
const clients: (Redis | Cluster)[] = [];

/** A file under this test's folder holding `text`; its path. */
function file(name: string, text: string): string {
  const path = join(work, name);
  writeFileSync(path, text);
  return path;
}

beforeAll(async () => {
  certs = makeCertificates(join(work, 'certs'));
  // One broker and the Redis servers for the whole file, started together.
  [kafka, redis, redisCluster] = await Promise.all([
    startSecuredKafka(`secured-${randomUUID().slice(0, 8)}`, certs),
    startSecuredRedis(certs),
    startSecuredRedis(certs, { cluster: true }),
  ]);
}, 180_000);

afterAll(async () => {
  await stopAll();
  await Promise.allSettled(clients.map((c) => c.quit()));
  await Promise.allSettled([kafka?.kafka.stop(), redis?.stop(), redisCluster?.stop()]);
  rmSync(work, { recursive: true, force: true });
});

/** The Kafka variables of a service on the SASL_SSL listener with `mechanism`, the password in a file. */
function saslEnv(mechanism: string, password = kafka.password): Record<string, string> {
  return {
    KAFKA_BROKERS: kafka.saslSslBrokers.join(','),
    KAFKA_SSL: 'true',
    KAFKA_SSL_CA_FILE: certs.caFile,
    KAFKA_SASL_MECHANISM: mechanism,
    KAFKA_SASL_USERNAME: kafka.username,
    KAFKA_SASL_PASSWORD_FILE: file(`kafka-password-${randomUUID().slice(0, 8)}`, `${password}\n`),
  };
}

/** Bus options as a service derives them from its variables (step-context's schema). */
function busSecurityFrom(env: Record<string, string>) {
  return kafkaBusSecurity(loadStepContextConfig(env).kafkaSecurity);
}

const testTimings = {
  sessionTimeoutMs: 10_000,
  heartbeatIntervalMs: 500,
  rebalanceTimeoutMs: 10_000,
  maxWaitMs: 200,
  retryBackoffMs: 50,
  connectTimeoutMs: 3_000,
  retries: 3,
};

async function deleteTopics(names: string[]): Promise<void> {
  const { tls, sasl } = busSecurityFrom(saslEnv('SCRAM-SHA-512'));
  const admin = new kafkajs.Kafka({
    clientId: 'ctxflow-test-cleanup',
    brokers: kafka.saslSslBrokers,
    ssl: tls,
    sasl: sasl as kafkajs.SASLOptions,
    logLevel: kafkajs.logLevel.NOTHING,
  }).admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics: names });
  } finally {
    await admin.disconnect();
  }
}

for (const [client, mechanism] of [
  ['kafkajs', 'SCRAM-SHA-512'],
  ['platformatic', 'SCRAM-SHA-256'],
] satisfies [KafkaClientName, string][]) {
  busContract({
    // Part of the test topics' names: Kafka's topic characters only.
    name: `${client}.sasl_ssl.${mechanism.toLowerCase()}`,
    create: () =>
      createBus({
        brokers: kafka.saslSslBrokers,
        client,
        clientId: `ctxflow-test-${randomUUID().slice(0, 8)}`,
        ...testTimings,
        ...busSecurityFrom(saslEnv(mechanism)),
      }),
    deleteTopics,
    // @platformatic/kafka commits no metadata, so its commits name no topic id (bus.contract.test.ts).
    commitsTopicId: client === 'kafkajs',
    settleMs: 1_500,
    deliveryTimeoutMs: 20_000,
  });
}

describe('secured Kafka: every mechanism on both clients', () => {
  const cases: { name: string; env: () => Record<string, string>; brokers: () => string[] }[] = [
    ...['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'].map((mechanism) => ({
      name: `SASL_SSL ${mechanism}`,
      env: () => saslEnv(mechanism),
      brokers: () => kafka.saslSslBrokers,
    })),
    {
      name: 'SASL_SSL OAUTHBEARER (token from a file)',
      env: () => ({
        KAFKA_BROKERS: kafka.saslSslBrokers.join(','),
        KAFKA_SSL: 'true',
        KAFKA_SSL_CA_FILE: certs.caFile,
        KAFKA_SASL_MECHANISM: 'OAUTHBEARER',
        KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: file(`token-${randomUUID().slice(0, 8)}`, unsecuredJwt('ctxflow')),
      }),
      brokers: () => kafka.saslSslBrokers,
    },
    {
      name: 'SSL with a client certificate (mutual TLS)',
      env: () => ({
        KAFKA_BROKERS: kafka.sslBrokers.join(','),
        KAFKA_SSL: 'true',
        KAFKA_SSL_CA_FILE: certs.caFile,
        KAFKA_SSL_CERT_FILE: certs.clientCertFile,
        KAFKA_SSL_KEY_FILE: certs.clientKeyFile,
      }),
      brokers: () => kafka.sslBrokers,
    },
  ];
  for (const client of ['kafkajs', 'platformatic'] satisfies KafkaClientName[]) {
    for (const c of cases) {
      it(`${client}, ${c.name}: creates a topic and publishes to it`, async () => {
        const bus = createBus({
          brokers: c.brokers(),
          client,
          clientId: `ctxflow-test-${randomUUID().slice(0, 8)}`,
          ...testTimings,
          ...busSecurityFrom(c.env()),
        });
        const topic = `ctxflow-test.secured.${randomUUID().slice(0, 8)}`;
        try {
          await bus.admin.ensureTopics([{ name: topic, partitions: 1 }]);
          await expect(bus.publisher.publish(topic, [{ key: 'k', value: 'v' }])).resolves.toBeUndefined();
        } finally {
          await Promise.allSettled([bus.publisher.close(), bus.admin.close()]);
          await deleteTopics([topic]);
        }
      });
    }
  }

  it('without a client certificate the SSL listener refuses both clients (bus_unavailable)', async () => {
    for (const client of ['kafkajs', 'platformatic'] satisfies KafkaClientName[]) {
      const bus = createBus({
        brokers: kafka.sslBrokers,
        client,
        clientId: 'ctxflow-test-no-cert',
        ...testTimings,
        retries: 0,
        tls: { ca: certs.ca },
      });
      try {
        await expect(bus.admin.ensureTopics([{ name: 'ctxflow-test.never', partitions: 1 }])).rejects.toMatchObject({
          code: 'bus_unavailable',
        });
      } finally {
        await Promise.allSettled([bus.publisher.close(), bus.admin.close()]);
      }
    }
  });
});

/** A Redis client as a service makes it from its variables. */
function securedRedisClient(env: Record<string, string>): Redis | Cluster {
  const config = loadStepContextConfig(env);
  const client = connectRedis(config);
  if (client === undefined) throw new Error('no Redis configured');
  client.on('error', () => {});
  clients.push(client);
  return client;
}

async function deletePrefix(client: Redis | Cluster, prefix: string): Promise<void> {
  const nodes = 'nodes' in client && typeof client.nodes === 'function' ? client.nodes('master') : [client as Redis];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      cursor = next;
      for (const key of keys) await node.del(key);
    } while (cursor !== '0');
  }
}

let standalone: Redis | Cluster | undefined;
sessionStoreContract('redis over TLS with an ACL user (password from a file)', async (options) => {
  standalone ??= securedRedisClient({
    REDIS_URL: redis.url,
    REDIS_TLS_CA_FILE: certs.caFile,
    REDIS_USERNAME: redis.username,
    REDIS_PASSWORD_FILE: file('redis-password', `${redis.password}\n`),
  });
  return securedStore(standalone, options);
});

let cluster: Redis | Cluster | undefined;
sessionStoreContract('redis cluster over TLS with an ACL user (credentials in the variables)', async (options) => {
  cluster ??= securedRedisClient({
    REDIS_CLUSTER_NODES: redisCluster.nodes.join(','),
    REDIS_TLS: 'true',
    REDIS_TLS_CA_FILE: certs.caFile,
    REDIS_USERNAME: redisCluster.username,
    REDIS_PASSWORD: redisCluster.password,
  });
  return securedStore(cluster, options);
});

/** A session store under a fresh prefix on a secured client, with the contract's retention hooks. */
function securedStore(client: Redis | Cluster, options: { ttlMs?: number } | undefined) {
  const prefix = `ctxtest-${randomUUID().slice(0, 12)}`;
  return {
    store: new RedisSessionStore(client, { prefix, ...(options?.ttlMs === undefined ? {} : { ttlMs: options.ttlMs }) }),
    cleanup: () => deletePrefix(client, prefix),
    keysOf: (sessionId: string) => keysOfSession(client, prefix, sessionId),
  };
}

/**
 * A service started with `env` until it is ready or exits (then SIGTERM): everything it
 * wrote, and how it ended. step-context by default; `feed-ingestor` routes its Kafka
 * client's own log lines through its logger too.
 */
async function startService(
  env: Record<string, string>,
  service: 'step-context' | 'feed-ingestor' = 'step-context',
): Promise<{ ready: boolean; exitCode: number | null; output: string }> {
  const port = await freePort();
  const entry = service === 'step-context' ? ENTRIES.stepContext : ENTRIES.feedIngestor;
  const child = spawn(process.execPath, [join(ROOT, entry)], {
    cwd: ROOT,
    env: serviceEnv({
      CTXFLOW_STEP_CONTEXT_PORT: String(port),
      CTXFLOW_FEED_PORT: String(port),
      CTXFLOW_FEED_SECRET_GENERIC: 'feed-secret',
      CTXFLOW_STEP_CONTEXT_GROUP: `ctxflow-test-secured-${randomUUID().slice(0, 8)}`,
      CTXFLOW_REDIS_PREFIX: `ctxtest-${randomUUID().slice(0, 12)}`,
      KAFKA_TOPIC_PREFIX: `ctxflow-test-secured-${randomUUID().slice(0, 8)}.`,
      KAFKA_SESSION_TIMEOUT_MS: '6000',
      CTXFLOW_LOG_LEVEL: 'debug',
      ...env,
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const ready = await waitFor(
    `${service} to be ready or to exit`,
    async () => {
      if (child.exitCode !== null) return 'exited';
      const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
      return res?.status === 200 ? 'ready' : undefined;
    },
    60_000,
    100,
  );
  if (ready === 'ready') {
    child.kill('SIGTERM');
  }
  const exitCode = await exited;
  return { ready: ready === 'ready', exitCode, output };
}

// Concurrent: each test is its own process, mostly waiting on a start or a client's retries
// (a refused start waits for the client's retries: up to ~10 s on a loaded machine).
describe.concurrent('a service on secured Kafka and Redis', { timeout: 90_000 }, () => {
  const redisEnv = () => ({
    REDIS_URL: redis.url,
    REDIS_TLS_CA_FILE: certs.caFile,
    REDIS_USERNAME: redis.username,
    REDIS_PASSWORD: redis.password,
  });

  it('starts over SASL_SSL and TLS Redis, and no line it writes holds a password', async () => {
    const started = await startService({ ...saslEnv('SCRAM-SHA-512'), ...redisEnv() });
    expect(started.ready, started.output).toBe(true);
    expect(started.exitCode).toBe(0);
    expect(started.output).toContain('step-context: listening');
    expect(started.output).not.toContain(kafka.password);
    expect(started.output).not.toContain(redis.password);
  });

  it('feed-ingestor on kafkajs (its client log lines go through the logger): no password in any line', async () => {
    const started = await startService(
      { ...saslEnv('PLAIN'), KAFKA_CLIENT: 'kafkajs', ...redisEnv() },
      'feed-ingestor',
    );
    expect(started.ready, started.output).toBe(true);
    expect(started.exitCode).toBe(0);
    expect(started.output).toContain('feed-ingestor: listening');
    expect(started.output).not.toContain(kafka.password);
    expect(started.output).not.toContain(redis.password);
  });

  it('feed-ingestor on kafkajs: a wrong Kafka password stops the start naming KAFKA_SASL_PASSWORD_FILE', async () => {
    const started = await startService(
      { ...saslEnv('SCRAM-SHA-512', 'wrong-kafka-password'), KAFKA_CLIENT: 'kafkajs', ...redisEnv() },
      'feed-ingestor',
    );
    expect(started.exitCode, started.output).toBe(2);
    expect(started.output).toMatch(
      /feed-ingestor: cannot start: KAFKA_SASL_PASSWORD_FILE: Kafka refused the credentials/,
    );
    expect(started.output).not.toContain('wrong-kafka-password');
  });

  it('a wrong Kafka password stops the start naming KAFKA_SASL_PASSWORD_FILE', async () => {
    const started = await startService({ ...saslEnv('SCRAM-SHA-256', 'not-the-password'), ...redisEnv() });
    expect(started.ready).toBe(false);
    expect(started.exitCode).toBe(2);
    expect(started.output).toMatch(
      /step-context: cannot start: KAFKA_SASL_PASSWORD_FILE: Kafka refused the credentials/,
    );
    expect(started.output).not.toContain('not-the-password');
  });

  it('an untrusted Kafka certificate stops the start naming KAFKA_SSL_CA_FILE', async () => {
    const started = await startService({
      ...saslEnv('SCRAM-SHA-512'),
      KAFKA_SSL_CA_FILE: certs.otherCaFile,
      ...redisEnv(),
    });
    expect(started.exitCode).toBe(2);
    expect(started.output).toMatch(
      /step-context: cannot start: KAFKA_SSL_CA_FILE: the Kafka server's certificate is not trusted/,
    );
  });

  it('a wrong Redis password stops the start naming REDIS_PASSWORD', async () => {
    const started = await startService({ ...redisEnv(), REDIS_PASSWORD: 'not-the-password' });
    expect(started.exitCode).toBe(2);
    expect(started.output).toMatch(/step-context: cannot start: REDIS_PASSWORD: Redis refused the credentials/);
    expect(started.output).not.toContain('not-the-password');
  });

  it('an untrusted Redis certificate stops the start naming REDIS_TLS_CA_FILE', async () => {
    const started = await startService({ ...redisEnv(), REDIS_TLS_CA_FILE: certs.otherCaFile });
    expect(started.exitCode).toBe(2);
    expect(started.output).toMatch(
      /step-context: cannot start: REDIS_TLS_CA_FILE: the Redis server's certificate is not trusted/,
    );
  });

  it('a missing CA file stops the start before any connection, naming the variable', async () => {
    const started = await startService({ ...redisEnv(), REDIS_TLS_CA_FILE: join(work, 'no-such-ca.pem') });
    expect(started.exitCode).toBe(2);
    expect(started.output).toContain(`REDIS_TLS_CA_FILE: cannot read ${join(work, 'no-such-ca.pem')} (ENOENT)`);
  });
});
