/**
 * The topic id record (services/session-runner/src/ports/topic-id-record.ts) against every
 * adapter: in memory, Redis, Redis Cluster; then the Redis adapter's key.
 */
import { randomUUID } from 'node:crypto';
import { MemoryTopicIdRecord, RedisTopicIdRecord, type TopicIdRecord } from '@ctxflow/session-runner';
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { requireRedis, requireRedisCluster } from '../support/services.ts';

const ID = 'a6f1c2de-0000-4000-8000-000000000001';
const OTHER = 'a6f1c2de-0000-4000-8000-000000000002';
const uniquePrefix = () => `ctxtest-${randomUUID().slice(0, 12)}`;

let redis: Redis | undefined;
let cluster: Cluster | undefined;
/** The prefixes used, each deleted at the end. */
const prefixes: string[] = [];
const prefixed = () => {
  const prefix = uniquePrefix();
  prefixes.push(prefix);
  return prefix;
};

afterAll(async () => {
  const nodes = [...(redis ? [redis] : []), ...(cluster ? cluster.nodes('master') : [])];
  for (const node of nodes) {
    for (const prefix of prefixes) {
      const keys = await node.keys(`${prefix}:*`);
      for (const key of keys) await node.del(key);
    }
  }
  await redis?.quit();
  await cluster?.quit();
});

const adapters: [string, () => TopicIdRecord][] = [
  ['memory', () => new MemoryTopicIdRecord()],
  [
    'redis',
    () => {
      redis ??= new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
      return new RedisTopicIdRecord(redis, prefixed());
    },
  ],
  [
    'redis cluster',
    () => {
      cluster ??= new Cluster(requireRedisCluster(), { redisOptions: { maxRetriesPerRequest: 3 } });
      return new RedisTopicIdRecord(cluster, prefixed());
    },
  ],
];

describe.each(adapters)('the topic id record (%s)', (_name, make) => {
  it('names nothing for a partition never recorded', async () => {
    expect(await make().read('runners', 'steps', 0)).toBeUndefined();
  });

  it('reads what was written; a later write replaces it', async () => {
    const record = make();
    await record.write('runners', 'steps', 3, ID);
    expect(await record.read('runners', 'steps', 3)).toBe(ID);
    await record.write('runners', 'steps', 3, OTHER);
    expect(await record.read('runners', 'steps', 3)).toBe(OTHER);
  });

  it('keeps each group, topic and partition apart', async () => {
    const record = make();
    await record.write('runners', 'steps', 3, ID);
    expect(await record.read('runners', 'steps', 4)).toBeUndefined();
    expect(await record.read('runners', 'steps-dlq', 3)).toBeUndefined();
    expect(await record.read('others', 'steps', 3)).toBeUndefined();
  });
});

describe('the Redis topic id record', () => {
  it('keeps a group and topic in one hash, partition -> topic id, without expiry', async () => {
    redis ??= new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
    const prefix = prefixed();
    const record = new RedisTopicIdRecord(redis, prefix);
    await record.write('runners', 'ctxflow.step-requests.v1', 7, ID);
    const key = `${prefix}:session-runner:topic-ids:runners:ctxflow.step-requests.v1`;
    expect(await redis.hgetall(key)).toEqual({ '7': ID });
    expect(await redis.pttl(key)).toBe(-1);
  });

  it('refuses a prefix with braces when made', () => {
    redis ??= new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
    expect(() => new RedisTopicIdRecord(redis!, 'a{b}')).toThrow(
      'the session store key prefix must not contain braces: "a{b}"',
    );
  });
});
