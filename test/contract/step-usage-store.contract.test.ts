/**
 * The step usage store contract against every adapter: in memory, Redis, Redis Cluster;
 * then the Redis adapter's key (the session's hash tag) and store_unavailable.
 */
import { randomUUID } from 'node:crypto';
import { MemoryStepUsageStore, RedisStepUsageStore } from '@ctxflow/session-runner';
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { requireRedis, requireRedisCluster } from '../support/services.ts';
import { stepUsageStoreContract } from './step-usage-store.contract.ts';

const uniquePrefix = () => `ctxtest-${randomUUID().slice(0, 12)}`;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

stepUsageStoreContract('memory', async (options) => {
  let now = Date.parse('2026-01-01T00:00:00Z');
  const clock = options?.clock ?? { now: () => now };
  return {
    store: new MemoryStepUsageStore({ ...options, clock }),
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

async function deleteUsage(client: Redis | Cluster, prefix: string): Promise<void> {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      cursor = next;
      for (const key of keys) await node.del(key);
    } while (cursor !== '0');
  }
}

stepUsageStoreContract('redis', async (options) => {
  redis ??= new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
  const client = redis;
  const prefix = uniquePrefix();
  return {
    store: new RedisStepUsageStore(client, { prefix, ...(options?.ttlMs ? { ttlMs: options.ttlMs } : {}) }),
    cleanup: () => deleteUsage(client, prefix),
    pass: sleep,
  };
});

stepUsageStoreContract('redis cluster', async (options) => {
  cluster ??= new Cluster(requireRedisCluster(), { redisOptions: { maxRetriesPerRequest: 3 } });
  const client = cluster;
  const prefix = uniquePrefix();
  return {
    store: new RedisStepUsageStore(client, { prefix, ...(options?.ttlMs ? { ttlMs: options.ttlMs } : {}) }),
    cleanup: () => deleteUsage(client, prefix),
    pass: sleep,
  };
});

describe('the Redis step usage store', () => {
  it("keeps a session's reports in one hash under the session's hash tag, with the retention", async () => {
    redis ??= new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
    const prefix = uniquePrefix();
    const store = new RedisStepUsageStore(redis, { prefix, ttlMs: 60_000 });
    const sessionId = `ses_${randomUUID()}`;
    const usage = {
      stepId: 'stp_1',
      ordinal: 1,
      format: 'anthropic' as const,
      inputTokens: 3000,
      cachedTokens: 0,
      cacheWriteTokens: 3000,
      predictedTokens: 0,
      shortfall: false,
      at: '2026-01-01T00:00:00.000Z',
    };
    await store.record(sessionId, usage);
    const key = `${prefix}:{${sessionId}}:usage`;
    expect(await redis.hgetall(key)).toEqual({ stp_1: JSON.stringify(usage) });
    const pttl = await redis.pttl(key);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(60_000);
    await deleteUsage(redis, prefix);
  });

  it('a Redis that does not answer is store_unavailable (retryable)', async () => {
    const down = new Redis({ port: 1, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    down.on('error', () => {});
    const store = new RedisStepUsageStore(down, { prefix: uniquePrefix() });
    await expect(store.list('ses_x')).rejects.toMatchObject({ code: 'store_unavailable', retryable: true });
    down.disconnect();
  });
});
