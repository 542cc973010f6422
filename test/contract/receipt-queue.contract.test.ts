/**
 * The receipt queue contract against every adapter: in memory, Redis, Redis Cluster;
 * then the Redis adapter's keys (one hash tag) and store_unavailable.
 */
import { randomUUID } from 'node:crypto';
import { MemoryReceiptQueue, RedisReceiptQueue, receiptId } from '@ctxflow/session-runner';
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { requireRedis, requireRedisCluster } from '../support/services.ts';
import { receipt, receiptQueueContract } from './receipt-queue.contract.ts';

const uniquePrefix = () => `ctxtest-${randomUUID().slice(0, 12)}`;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

receiptQueueContract('memory', async (options) => {
  let now = Date.parse('2026-01-01T00:00:00Z');
  return {
    queue: new MemoryReceiptQueue({ ...options, clock: { now: () => now } }),
    cleanup: async () => {},
    pass: async (ms) => {
      now += ms;
    },
  };
});

let redis: Redis | undefined;
let cluster: Cluster | undefined;
afterAll(async () => {
  await redis?.quit();
  await cluster?.quit();
});

/** The queue's five keys (one slot, so on a Cluster one node holds them all). */
function queueKeys(prefix: string): string[] {
  return ['due', 'receipts', 'states', 'dead', 'sent'].map((name) => `${prefix}:{receipts}:${name}`);
}

async function deleteQueue(client: Redis | Cluster, prefix: string): Promise<void> {
  for (const key of queueKeys(prefix)) await client.del(key);
}

receiptQueueContract('redis', async (options) => {
  redis ??= new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
  const client = redis;
  const prefix = uniquePrefix();
  return {
    queue: new RedisReceiptQueue(client, { prefix, ...options }),
    cleanup: () => deleteQueue(client, prefix),
    pass: sleep,
  };
});

receiptQueueContract('redis cluster', async (options) => {
  cluster ??= new Cluster(requireRedisCluster(), { redisOptions: { maxRetriesPerRequest: 3 } });
  const client = cluster;
  const prefix = uniquePrefix();
  return {
    queue: new RedisReceiptQueue(client, { prefix, ...options }),
    cleanup: () => deleteQueue(client, prefix),
    pass: sleep,
  };
});

describe('the Redis receipt queue', () => {
  it('keeps its receipts under one hash tag, the receipt JSON as enqueued', async () => {
    redis ??= new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
    const prefix = uniquePrefix();
    const queue = new RedisReceiptQueue(redis, { prefix });
    const one = receipt();
    await queue.enqueue([one]);
    const [due, receipts, states] = queueKeys(prefix);
    expect(await redis.zrange(due!, '0', '-1')).toEqual([receiptId(one)]);
    expect(await redis.hgetall(receipts!)).toEqual({ [receiptId(one)]: JSON.stringify(one) });
    expect(await redis.hgetall(states!)).toEqual({ [receiptId(one)]: '{"attempts":0}' });
    await deleteQueue(redis, prefix);
  });

  it('refuses a prefix with braces (it would move the hash tag)', () => {
    redis ??= new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
    expect(() => new RedisReceiptQueue(redis!, { prefix: 'a{b}' })).toThrow(/braces/);
  });

  it('a Redis that does not answer is store_unavailable (retryable)', async () => {
    const down = new Redis({ port: 1, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    down.on('error', () => {});
    const queue = new RedisReceiptQueue(down, { prefix: uniquePrefix() });
    await expect(queue.take(1, 1_000)).rejects.toMatchObject({ code: 'store_unavailable', retryable: true });
    down.disconnect();
  });
});
