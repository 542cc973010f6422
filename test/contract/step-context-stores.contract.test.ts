import { randomUUID } from 'node:crypto';
import { MemoryFeedStreams, RedisFeedStreams, stepContextKeys } from '@ctxflow/step-context';
import { MemorySubscriptionStore, RedisSubscriptionStore, subscriptionId } from '@ctxflow/subscriptions';
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { deleteKeys, keysOfSession, makeUpdate, uniquePrefix } from '../../services/step-context/test/helpers.ts';
import { requireRedis, requireRedisCluster } from '../support/services.ts';
import { feedStreamsContract } from './feed-streams.contract.ts';
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

/** Every key of `tenant`'s `source` (its hash tag), with its PTTL, on every master. */
async function keysOfSource(redis: Redis | Cluster, prefix: string, tenant: string, source: string) {
  const tag = stepContextKeys(prefix).source(tenant, source).seq.slice(0, -':seq'.length);
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
  const found: { key: string; pttl: number }[] = [];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${tag}:*`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) found.push({ key, pttl: await node.pttl(key) });
    } while (cursor !== '0');
  }
  return found;
}

feedStreamsContract({
  name: 'memory',
  create: async (options = {}) => {
    const subscriptions = new MemorySubscriptionStore(options);
    const store = new MemoryFeedStreams({ ...options, subscriptions });
    return { store, subscriptions, cleanup: async () => {} };
  },
});

for (const [name, open] of [
  ['redis', onRedis],
  ['redis cluster (one script per source)', onCluster],
] as const) {
  feedStreamsContract({
    name,
    create: async (options = {}) => {
      const { redis, prefix, cleanup } = open();
      const ttl = options.ttlMs === undefined ? {} : { ttlMs: options.ttlMs };
      const clock = options.clock ? { clock: options.clock } : {};
      return {
        store: new RedisFeedStreams({ redis, prefix, ...ttl, ...clock }),
        subscriptions: new RedisSubscriptionStore({ redis, prefix, ...ttl, ...clock }),
        keysOf: (sessionId) => keysOfSession(redis, prefix, sessionId),
        keysOfSource: (tenant, source) => keysOfSource(redis, prefix, tenant, source),
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

    it("each tenant's source has keys of its own; the default tenant's and another's never meet", async () => {
      const store = new RedisSubscriptionStore({ redis, prefix });
      const keys = stepContextKeys(prefix);
      const sub = { source: 'generic', ticket: '*' } as const;
      const id = subscriptionId(sub);
      const [ofDefault, ofTa] = [`s-${randomUUID()}`, `s-${randomUUID()}`];
      await store.subscribe('default', ofDefault, sub);
      await store.subscribe('ta', ofTa, sub);
      const [followersDefault, followersTa] = [
        keys.source('default', 'generic').followers(id),
        keys.source('ta', 'generic').followers(id),
      ];
      expect(followersDefault).not.toBe(followersTa);
      expect(await redis.zrange(followersDefault, '0', '-1')).toEqual([ofDefault]);
      expect(await redis.zrange(followersTa, '0', '-1')).toEqual([ofTa]);
      expect(JSON.parse((await redis.hget(keys.session(ofTa).subscriptions, id))!)).toEqual(['ta', 0]);
      expect(await store.sessionsFor({ tenant: 'ta', source: 'generic', ticket: 'T-9' })).toEqual([ofTa]);
      expect(await store.sessionsFor({ source: 'generic', ticket: 'T-9' })).toEqual([ofDefault]);
    });
  });
}

// Redis only: the global offset lost after the sources were written (on Redis Cluster, a crash between
// the per-source scripts and the offset record; on a single Redis the write is one script, so this
// stands for a lost offsets hash). The redelivered run doubles nothing.
for (const [name, open] of [
  ['redis', onRedis],
  ['redis cluster (one script per source)', onCluster],
] as const) {
  describe(`RedisFeedStreams on ${name}: a run redelivered after its global offset was lost`, () => {
    const { redis, prefix, cleanup } = open();
    afterAll(cleanup);

    it('stores nothing twice and records the offset again', async () => {
      const subscriptions = new RedisSubscriptionStore({ redis, prefix });
      const store = new RedisFeedStreams({ redis, prefix });
      const [a, t, tenant] = [`s-${randomUUID()}`, `topic-${randomUUID().slice(0, 8)}`, `t-${randomUUID()}`];
      await subscriptions.subscribe(tenant, a, { source: 'generic', ticket: '*' });
      await subscriptions.subscribe(tenant, a, { source: 'jira', ticket: '*', scope: 'L' });
      const u = [
        makeUpdate({ tenant, ticket: 'L1' }),
        makeUpdate({ tenant, source: 'jira', ticket: 'L-2', scope: 'L' }),
      ];
      const run = [
        { position: { topic: t, partition: 0, offset: '4' }, update: u[0]! },
        { position: { topic: t, partition: 0, offset: '5' }, update: u[1]! },
      ];
      await store.applyRun(run);
      await redis.hdel(stepContextKeys(prefix).offsets, `${t}:0`);
      expect(await store.resumeFrom(t, 0)).toBeUndefined();
      expect(await store.applyRun(run)).toEqual([
        { applied: true, outcome: { outcome: 'duplicate' } },
        { applied: true, outcome: { outcome: 'duplicate' } },
      ]);
      expect(await store.resumeFrom(t, 0)).toBe('6');
      const all = { maxEntries: 100, maxBytes: 1e9 };
      const entries = await store.readSince(await subscriptions.follows(a), {}, all);
      expect(entries.map((e) => e.update.id).sort()).toEqual([u[0]!.id, u[1]!.id].sort());
    });
  });
}

// Redis only: a follower whose session expired (its score is its expiry) makes no stream
// watched; a follower whose session's hash is gone leaves the followers set at prune.
for (const [name, open] of [
  ['redis', onRedis],
  ['redis cluster', onCluster],
] as const) {
  describe(`RedisSubscriptionStore on ${name}: followers of expired sessions`, () => {
    const { redis, prefix, cleanup } = open();
    afterAll(cleanup);

    it('an expired follower watches nothing and sessionsFor leaves it out; prune removes a follower without a session', async () => {
      let now = Date.parse('2026-03-01T00:00:00.000Z');
      const clock = { now: () => now };
      const store = new RedisSubscriptionStore({ redis, prefix, ttlMs: 60_000, clock });
      const feedStreams = new RedisFeedStreams({ redis, prefix, ttlMs: 60_000, clock });
      const keys = stepContextKeys(prefix);
      const [expired, live, t] = [`s-${randomUUID()}`, `s-${randomUUID()}`, `topic-${randomUUID().slice(0, 8)}`];
      const ticket = `EXP-${randomUUID().slice(0, 8)}`;
      const target = { tenant: 'tx', source: 'generic' as const, ticket };
      await store.subscribe('tx', expired, { source: 'generic', ticket });
      now += 100_000; // past 1.25 x the TTL: the first follower expired
      expect(await store.sessionsFor(target)).toEqual([]);
      const [lost] = await feedStreams.applyRun([
        { position: { topic: t, partition: 0, offset: '1' }, update: makeUpdate(target) },
      ]);
      expect(lost).toEqual({ applied: true, outcome: { outcome: 'unwatched' } });
      await store.subscribe('tx', live, { source: 'generic', ticket });
      expect(await store.sessionsFor(target)).toEqual([live]);
      const [kept] = await feedStreams.applyRun([
        { position: { topic: t, partition: 0, offset: '2' }, update: makeUpdate(target) },
      ]);
      expect(kept).toEqual({ applied: true, outcome: { outcome: 'appended', seq: 1, streams: 1 } });
      // A session whose hash is gone (erased by another path): prune takes its follower out.
      await redis.del(keys.session(live).subscriptions);
      await store.prune(target, [live]);
      expect(await store.sessionsFor(target)).toEqual([]);
      expect(await keysOfSession(redis, prefix, live)).toEqual([]);
    });
  });
}
