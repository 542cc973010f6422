/**
 * The services that test/setup/services.ts provisions really work: a record goes through
 * Kafka, and Redis and the Redis Cluster store and return values.
 */
import { randomUUID } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, describe, expect, it } from 'vitest';
import { requireKafka, requireRedis, requireRedisCluster } from '../support/services.ts';

const RUN = randomUUID();

describe('provisioned Kafka', () => {
  it('delivers a produced record to a consumer of a fresh topic, key, value and headers intact', async () => {
    const kafka = new Kafka({ clientId: `infra-test-${RUN}`, brokers: requireKafka(), logLevel: logLevel.NOTHING });
    const topic = `infra-test-${RUN}`;
    const admin = kafka.admin();
    const producer = kafka.producer({ allowAutoTopicCreation: false });
    const consumer = kafka.consumer({ groupId: `infra-test-${RUN}` });
    await admin.connect();
    try {
      expect(await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true })).toBe(true);
      await producer.connect();
      await consumer.connect();
      await consumer.subscribe({ topics: [topic], fromBeginning: true });
      const received = new Promise<{ key: string; value: string; header: string; offset: string }>((done) => {
        void consumer.run({
          eachMessage: async ({ message }) =>
            done({
              key: String(message.key),
              value: String(message.value),
              header: String(message.headers?.['x-run']),
              offset: message.offset,
            }),
        });
      });
      await producer.send({ topic, messages: [{ key: 'k-1', value: 'hello', headers: { 'x-run': RUN } }] });
      expect(await received).toEqual({ key: 'k-1', value: 'hello', header: RUN, offset: '0' });
    } finally {
      await consumer.disconnect();
      await producer.disconnect();
      await admin.deleteTopics({ topics: [topic] }).catch(() => {});
      await admin.disconnect();
    }
  });
});

describe('provisioned Redis', () => {
  const redis = new Redis(requireRedis(), { lazyConnect: true, maxRetriesPerRequest: 1 });
  const prefix = `test:infra:${RUN}:`;
  afterAll(async () => {
    await redis.del(`${prefix}greeting`);
    redis.disconnect();
  });

  it('returns what was SET, and nothing for a key never set', async () => {
    expect(await redis.set(`${prefix}greeting`, 'hello', 'PX', 60_000)).toBe('OK');
    expect(await redis.get(`${prefix}greeting`)).toBe('hello');
    expect(await redis.get(`${prefix}absent`)).toBeNull();
  });
});

describe('provisioned Redis Cluster', () => {
  const cluster = new Cluster(requireRedisCluster(), { lazyConnect: true });
  // Hash tags {a}, {b}, {c} map to slots 15495, 3300 and 7365: one on each of three masters.
  const keys = ['a', 'b', 'c'].map((tag) => `test:infra:{${tag}}:${RUN}`);
  afterAll(async () => {
    await Promise.all(keys.map((key) => cluster.del(key)));
    cluster.disconnect();
  });

  it('has three masters covering all slots, and stores keys that live on different masters', async () => {
    await cluster.connect();
    const info = await cluster.cluster('INFO');
    expect(info).toContain('cluster_state:ok');
    expect(info).toContain('cluster_slots_assigned:16384');
    expect(cluster.nodes('master')).toHaveLength(3);

    for (const [index, key] of keys.entries()) expect(await cluster.set(key, `v${index}`, 'PX', 60_000)).toBe('OK');
    expect(await Promise.all(keys.map((key) => cluster.get(key)))).toEqual(['v0', 'v1', 'v2']);
    const slots = await Promise.all(keys.map((key) => cluster.cluster('KEYSLOT', key)));
    expect(slots).toEqual([15495, 3300, 7365]);
  });
});
