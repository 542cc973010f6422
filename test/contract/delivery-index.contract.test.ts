/**
 * The delivery index contract against every adapter: in memory, Redis, Redis Cluster; then
 * the Redis adapter's key, retention and store_unavailable.
 */
import { randomUUID } from 'node:crypto';
import { MemoryDeliveryIndex, RedisDeliveryIndex } from '@ctxflow/feeds';
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { ledgerKeys } from '../../shared/feeds/src/adapters/redis/keys.ts';
import { requireRedis, requireRedisCluster } from '../support/services.ts';
import { deliveryIndexContract } from './delivery-index.contract.ts';

const uniquePrefix = () => `ctxtest-receipts-${randomUUID().slice(0, 12)}`;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

deliveryIndexContract('memory', async (options) => {
  let now = Date.parse('2026-01-01T00:00:00Z');
  return {
    index: new MemoryDeliveryIndex({ ...options, clock: () => now }),
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

async function deleteKeys(client: Redis | Cluster, prefix: string): Promise<void> {
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

deliveryIndexContract('redis', async (options) => {
  redis ??= new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
  const client = redis;
  const prefix = uniquePrefix();
  return {
    index: new RedisDeliveryIndex({ redis: client, prefix, ...options }),
    cleanup: () => deleteKeys(client, prefix),
    pass: sleep,
  };
});

deliveryIndexContract('redis cluster', async (options) => {
  cluster ??= new Cluster(requireRedisCluster(), { redisOptions: { maxRetriesPerRequest: 3 } });
  const client = cluster;
  const prefix = uniquePrefix();
  return {
    index: new RedisDeliveryIndex({ redis: client, prefix, ...options }),
    cleanup: () => deleteKeys(client, prefix),
    pass: sleep,
  };
});

describe('the Redis delivery index', () => {
  it("keeps a delivery's receipts in one hash named by tenant, source and event id, one field per session, with the retention", async () => {
    redis ??= new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
    const prefix = uniquePrefix();
    const index = new RedisDeliveryIndex({ redis, prefix, retainMs: 60_000 });
    const eventId = `evt-${randomUUID()}`;
    const receipt = {
      tenant: 'acme',
      source: 'generic',
      eventId,
      sessionId: 'ses_1',
      stepId: 'stp_1',
      rowId: 'stp_1.0',
      at: '2026-01-01T00:00:00.000Z',
    };
    await index.record([receipt]);
    const key = ledgerKeys(prefix).receipts('acme', 'generic', eventId);
    expect(key).toBe(`${prefix}:feed:receipts:{acme:generic:${eventId}}`);
    expect(await redis.hgetall(key)).toEqual({ ses_1: JSON.stringify(receipt) });
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(50_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
    await deleteKeys(redis, prefix);
  });

  it('Redis unreachable: store_unavailable, on a write and on a read', async () => {
    const dead = new Redis({
      host: '127.0.0.1',
      port: 1,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
    });
    const index = new RedisDeliveryIndex({ redis: dead, prefix: uniquePrefix() });
    const receipt = {
      tenant: 't',
      source: 'generic',
      eventId: 'e',
      sessionId: 's',
      stepId: 'p',
      rowId: 'p.0',
      at: 'x',
    };
    await expect(index.record([receipt])).rejects.toMatchObject({ code: 'store_unavailable', status: 503 });
    await expect(index.receipts('t', 'generic', 'e')).rejects.toMatchObject({ code: 'store_unavailable' });
    dead.disconnect();
  });
});
