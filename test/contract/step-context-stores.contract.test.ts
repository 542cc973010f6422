import { randomUUID } from 'node:crypto';
import {
  MemoryBatchStore,
  MemorySubscriptionStore,
  RedisBatchStore,
  RedisSubscriptionStore,
  stepContextKeys,
} from '@ctxflow/step-context';
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { subscriptionId } from '../../services/step-context/src/ports/subscription-store.ts';
import { deleteKeys, keysOfSession, makeUpdate, uniquePrefix } from '../../services/step-context/test/helpers.ts';
import { requireRedis, requireRedisCluster } from '../support/services.ts';
import { batchStoreContract } from './batch-store.contract.ts';
import { subscriptionStoreContract } from './subscription-store.contract.ts';

function onRedis() {
  const redis = new Redis(requireRedis(), { maxRetriesPerRequest: 2 });
  const prefix = uniquePrefix();
  return {
    redis,
    prefix,
    async cleanup() {
      await deleteKeys(redis, prefix);
      await redis.quit();
    },
  };
}

function onCluster() {
  const redis = new Cluster(requireRedisCluster(), { redisOptions: { maxRetriesPerRequest: 2 } });
  const prefix = uniquePrefix();
  return {
    redis,
    prefix,
    async cleanup() {
      await deleteKeys(redis, prefix);
      await redis.quit();
    },
  };
}

batchStoreContract({
  name: 'memory',
  create: async (options = {}) => {
    const subscriptions = new MemorySubscriptionStore(options);
    const store = new MemoryBatchStore({
      ...options,
      ...(options.subscribedOnly ? { subscribed: (id: string) => subscriptions.holds(id) } : {}),
    });
    return { store, subscriptions, cleanup: async () => {} };
  },
});

for (const [name, open] of [
  ['redis', onRedis],
  ['redis cluster (one script per session)', onCluster],
] as const) {
  batchStoreContract({
    name,
    create: async (options = {}) => {
      const { redis, prefix, cleanup } = open();
      const ttl = options.ttlMs === undefined ? {} : { ttlMs: options.ttlMs };
      return {
        store: new RedisBatchStore({ redis, prefix, ...ttl, subscribedOnly: options.subscribedOnly === true }),
        subscriptions: new RedisSubscriptionStore({ redis, prefix, ...ttl }),
        keysOf: (sessionId) => keysOfSession(redis, prefix, sessionId),
        cleanup,
      };
    },
  });
}

subscriptionStoreContract({
  name: 'memory',
  create: async (options = {}) => ({ store: new MemorySubscriptionStore(options), cleanup: async () => {} }),
});

for (const [name, open] of [
  ['redis', onRedis],
  ['redis cluster', onCluster],
] as const) {
  subscriptionStoreContract({
    name,
    create: async (options = {}) => {
      const { redis, prefix, cleanup } = open();
      const ttl = options.ttlMs === undefined ? {} : { ttlMs: options.ttlMs };
      return {
        store: new RedisSubscriptionStore({ redis, prefix, ...ttl }),
        keysOf: (sessionId) => keysOfSession(redis, prefix, sessionId),
        cleanup,
      };
    },
  });
}

// Redis only: the key shapes of the subscription index per tenant.
for (const [name, open] of [
  ['redis', onRedis],
  ['redis cluster', onCluster],
] as const) {
  describe(`RedisSubscriptionStore on ${name}: one subscriber set per tenant`, () => {
    const { redis, prefix, cleanup } = open();
    afterAll(cleanup);

    it('D7: the default tenant keeps the key of before tenants; another tenant has its own', async () => {
      const store = new RedisSubscriptionStore({ redis, prefix });
      const keys = stepContextKeys(prefix);
      const id = subscriptionId({ source: 'generic', ticket: '*' });
      // A subscription written before feeds had tenants: only the legacy subscriber set and the session's set.
      const legacy = `s-${randomUUID()}`;
      await redis.sadd(`${prefix}:step-context:subscribers:${id}`, legacy);
      await redis.sadd(keys.session(legacy).subscriptions, id);
      expect(await store.sessionsFor({ source: 'generic', ticket: 'T-9' })).toEqual([legacy]);
      expect(await store.sessionsFor({ tenant: 'ta', source: 'generic', ticket: 'T-9' })).toEqual([]);
      const ofTa = `s-${randomUUID()}`;
      await store.subscribe('ta', ofTa, { source: 'generic', ticket: '*' });
      expect(await redis.smembers(`${prefix}:step-context:tenant:ta:subscribers:${id}`)).toEqual([ofTa]);
      expect(await redis.smembers(keys.session(ofTa).subscriptions)).toEqual([id]);
      expect(await store.sessionsFor({ tenant: 'ta', source: 'generic', ticket: 'T-9' })).toEqual([ofTa]);
      expect(await store.sessionsFor({ source: 'generic', ticket: 'T-9' })).toEqual([legacy]);
    });
  });
}

// Redis only: the global offset lost after the sessions were written (on Redis Cluster, a crash between
// the per-session scripts and the offset record; on a single Redis the write is one script, so this
// stands for a lost offsets hash). The redelivered run doubles nothing.
for (const [name, open] of [
  ['redis', onRedis],
  ['redis cluster (one script per session)', onCluster],
] as const) {
  describe(`RedisBatchStore on ${name}: a run redelivered after its global offset was lost`, () => {
    const { redis, prefix, cleanup } = open();
    afterAll(cleanup);

    it('appends nothing twice and records the offset again', async () => {
      const store = new RedisBatchStore({ redis, prefix });
      const [a, b, t] = [`s-${randomUUID()}`, `s-${randomUUID()}`, `topic-${randomUUID().slice(0, 8)}`];
      const u = [makeUpdate({ ticket: 'L1' }), makeUpdate({ ticket: 'L2' })];
      const run = [
        { position: { topic: t, partition: 0, offset: '4' }, update: u[0]!, sessionIds: [a, b] },
        { position: { topic: t, partition: 0, offset: '5' }, update: u[1]!, sessionIds: [b] },
      ];
      await store.applyBatch(run);
      await redis.hdel(stepContextKeys(prefix).offsets, `${t}:0`);
      expect(await store.resumeFrom(t, 0)).toBeUndefined();
      expect(await store.applyBatch(run)).toEqual([
        { applied: true, sessions: { [a]: { outcome: 'duplicate' }, [b]: { outcome: 'duplicate' } } },
        { applied: true, sessions: { [b]: { outcome: 'duplicate' } } },
      ]);
      expect(await store.resumeFrom(t, 0)).toBe('6');
      const all = { maxEntries: 100, maxBytes: 1e9 };
      expect((await store.readSince(a, 0, all)).map((e) => e.update.id)).toEqual([u[0]!.id]);
      expect((await store.readSince(b, 0, all)).map((e) => e.update.id)).toEqual([u[0]!.id, u[1]!.id]);
    });
  });
}

// Redis only: a session whose subscriptions set expired stays in the subscriber sets until
// an update names it: the apply refuses it (`unsubscribed`) and the service prunes it.
for (const [name, open] of [
  ['redis', onRedis],
  ['redis cluster', onCluster],
] as const) {
  describe(`RedisSubscriptionStore on ${name}: pruning expired sessions from the index`, () => {
    const { redis, prefix, cleanup } = open();
    afterAll(cleanup);

    it('an expired session leaves the subscriber sets at prune; a live one keeps its entries', async () => {
      const store = new RedisSubscriptionStore({ redis, prefix });
      const batches = new RedisBatchStore({ redis, prefix, subscribedOnly: true });
      const keys = stepContextKeys(prefix);
      const [expired, live, t] = [`s-${randomUUID()}`, `s-${randomUUID()}`, `topic-${randomUUID().slice(0, 8)}`];
      const ticket = `EXP-${randomUUID().slice(0, 8)}`;
      for (const id of [expired, live]) await store.subscribe('tx', id, { source: 'generic', ticket });
      await redis.del(keys.session(expired).subscriptions); // as its TTL would
      const target = { tenant: 'tx', source: 'generic' as const, ticket };
      const sessionIds = await store.sessionsFor(target);
      expect(sessionIds).toEqual([expired, live].sort());
      const [result] = await batches.applyBatch([
        { position: { topic: t, partition: 0, offset: '1' }, update: makeUpdate(target), sessionIds },
      ]);
      expect(result).toEqual({
        applied: true,
        sessions: { [expired]: { outcome: 'unsubscribed' }, [live]: { outcome: 'appended', cursor: 1 } },
      });
      await store.prune(target, [expired]);
      expect(await store.sessionsFor(target)).toEqual([live]);
      expect(await keysOfSession(redis, prefix, expired)).toEqual([]);
    });
  });
}
