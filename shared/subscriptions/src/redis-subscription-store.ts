import { CtxflowError, updateTenant } from '@ctxflow/contracts';
import type { Cluster, Redis } from 'ioredis';
import { type SubscriptionKeys, subscriptionKeys } from './keys.ts';
import {
  candidateSubscriptions,
  type FeedFollow,
  type Subscription,
  type SubscriptionStore,
  subscriptionId,
  type UpdateTarget,
} from './subscription-store.ts';

/** The session hash's field of the last refresh of its followers' expiries (never a subscriptionId: those are JSON arrays). */
const REFRESHED = '~refreshed';

/**
 * Subscriptions on Redis: the session's own hash (under its hash tag) of its
 * subscriptions with their tenant and start position, and per tenant's
 * subscription (a stream, under its source's hash tag) the sorted set of its
 * followers scored by expiry, which the feed stream store's write reads (ZCOUNT from
 * now) to know whether the stream is watched.
 *
 * The two live in different hash slots, so no single script can write both on
 * Redis Cluster. The order makes every partial write harmless and a retry
 * complete: `subscribe` adds the follower first, then reads the source's
 * position and records the subscription in the session's hash (a crash between
 * them leaves a stream written for nobody's benefit until the retry); and adds
 * the follower again after (see prune). `unsubscribe` removes from the
 * session's hash first, then the follower. `eraseSession` removes the followers
 * first and deletes the hash last: a retry finds every subscription left.
 *
 * Retention (`ttlMs`): the session's hash gets that TTL at each subscribe and
 * `touch` (each step); its followers' expiries are set to 1.25 times the TTL
 * ahead and refreshed by a `touch` once a quarter of the TTL went by, so a
 * follower never expires before its session (at most a quarter TTL after it:
 * a stream is then written for a gone session a little longer, never missed
 * by a live one). Without retention followers never expire (`+inf`).
 */
export class RedisSubscriptionStore implements SubscriptionStore {
  readonly #redis: Redis | Cluster;
  readonly #keys: SubscriptionKeys;
  readonly #ownsClient: boolean;
  readonly #cluster: boolean;
  readonly #ttlMs: number;
  readonly #clock: { now(): number };

  /**
   * `cluster`: detected from the client unless given. `ttlMs`: retention (CTXFLOW_SESSION_TTL_MS; default 0, kept).
   * `clock`: epoch ms of the followers' expiries (default Date.now; the feed stream store's must agree).
   */
  constructor(options: {
    redis: Redis | Cluster;
    prefix?: string;
    ownsClient?: boolean;
    cluster?: boolean;
    ttlMs?: number;
    clock?: { now(): number };
  }) {
    this.#redis = options.redis;
    this.#keys = subscriptionKeys(options.prefix ?? 'ctxflow');
    this.#ownsClient = options.ownsClient ?? false;
    this.#cluster = options.cluster ?? (options.redis as { isCluster?: boolean }).isCluster === true;
    this.#ttlMs = options.ttlMs ?? 0;
    this.#clock = options.clock ?? { now: () => Date.now() };
  }

  /** The followers key of `tenant`'s subscription. */
  #followers(tenant: string, subscription: Subscription): string {
    return this.#keys.source(tenant, subscription.source).followers(subscriptionId(subscription));
  }

  /** A follower's expiry from now: '+inf' without retention. */
  #expiry(): string {
    return this.#ttlMs > 0 ? String(this.#clock.now() + Math.ceil(this.#ttlMs * 1.25)) : '+inf';
  }

  async #follow(tenant: string, sessionId: string, subscription: Subscription): Promise<void> {
    const key = this.#followers(tenant, subscription);
    await this.#redis.zadd(key, this.#expiry(), sessionId);
    if (this.#ttlMs > 0) {
      await this.#redis.pexpire(key, Math.ceil(this.#ttlMs * 1.25));
      await this.#redis.zremrangebyscore(key, '-inf', `(${this.#clock.now()}`);
    }
  }

  async subscribe(tenant: string, sessionId: string, subscription: Subscription): Promise<boolean> {
    return this.#guard(() => this.#subscribe(tenant, sessionId, subscription));
  }

  async #subscribe(tenant: string, sessionId: string, subscription: Subscription, start?: number): Promise<boolean> {
    const id = subscriptionId(subscription);
    await this.#follow(tenant, sessionId, subscription);
    const at = start ?? Number((await this.#redis.get(this.#keys.source(tenant, subscription.source).seq)) ?? 0);
    const own = this.#keys.session(sessionId).subscriptions;
    const had = await this.#redis.hget(own, id);
    if (had === null) await this.#redis.hset(own, id, JSON.stringify([tenant, at]));
    else if (start !== undefined && start < (JSON.parse(had) as [string, number])[1]) {
      await this.#redis.hset(own, id, JSON.stringify([tenant, start]));
    }
    if (this.#ttlMs > 0) await this.#redis.pexpire(own, this.#ttlMs);
    // Again after the session's hash: a prune that removed the follower in between is undone (see prune).
    await this.#redis.zadd(this.#followers(tenant, subscription), this.#expiry(), sessionId);
    return had === null;
  }

  async eraseSession(_tenant: string, sessionId: string): Promise<void> {
    await this.#guard(async () => {
      const follows = await this.#follows(sessionId);
      await Promise.all(follows.map((f) => this.#redis.zrem(this.#followers(f.tenant, f.subscription), sessionId)));
      await this.#redis.del(this.#keys.session(sessionId).subscriptions);
    });
  }

  async unsubscribe(tenant: string, sessionId: string, subscription: Subscription): Promise<boolean> {
    const id = subscriptionId(subscription);
    return this.#guard(async () => {
      const removed = (await this.#redis.hdel(this.#keys.session(sessionId).subscriptions, id)) === 1;
      await this.#redis.zrem(this.#followers(tenant, subscription), sessionId);
      return removed;
    });
  }

  /**
   * Per session: ZREM from the update's candidate followers sets, THEN read the
   * session's own hash and ZADD back the follower of the subscriptions it holds. With
   * subscribe's order (follower, own hash, follower again) no interleaving loses one.
   */
  async prune(update: UpdateTarget, sessionIds: readonly string[]): Promise<void> {
    if (sessionIds.length === 0) return;
    const tenant = updateTenant(update);
    const sets = candidateSubscriptions(update).map((c) => ({
      id: subscriptionId(c),
      key: this.#followers(tenant, c),
    }));
    await this.#guard(() =>
      Promise.all(
        sessionIds.map(async (sessionId) => {
          await Promise.all(sets.map(({ key }) => this.#redis.zrem(key, sessionId)));
          const own = new Set(await this.#redis.hkeys(this.#keys.session(sessionId).subscriptions));
          await Promise.all(
            sets.filter(({ id }) => own.has(id)).map(({ key }) => this.#redis.zadd(key, this.#expiry(), sessionId)),
          );
        }),
      ),
    );
  }

  async list(sessionId: string): Promise<Subscription[]> {
    return (await this.follows(sessionId)).map((f) => f.subscription);
  }

  async follows(sessionId: string): Promise<FeedFollow[]> {
    return this.#guard(() => this.#follows(sessionId));
  }

  async #follows(sessionId: string): Promise<FeedFollow[]> {
    const hash = await this.#redis.hgetall(this.#keys.session(sessionId).subscriptions);
    // Fields are subscriptionIds: their order is compareSubscriptions'.
    const ids = Object.keys(hash)
      .filter((id) => id !== REFRESHED)
      .sort();
    return ids.map((id) => {
      const [tenant, start] = JSON.parse(hash[id]!) as [string, number];
      return { tenant, subscription: parsedSubscription(id), start };
    });
  }

  async copySession(tenant: string, fromSessionId: string, toSessionId: string): Promise<void> {
    await this.#guard(async () => {
      for (const follow of await this.#follows(fromSessionId)) {
        await this.#subscribe(tenant, toSessionId, follow.subscription, follow.start);
      }
    });
  }

  async touch(sessionId: string): Promise<void> {
    if (this.#ttlMs === 0) return;
    const own = this.#keys.session(sessionId).subscriptions;
    await this.#guard(async () => {
      const [, refreshed] = await Promise.all([
        this.#redis.pexpire(own, this.#ttlMs),
        this.#redis.hget(own, REFRESHED),
      ]);
      const now = this.#clock.now();
      if (refreshed !== null && now - Number(refreshed) < this.#ttlMs / 4) return;
      const follows = await this.#follows(sessionId);
      if (follows.length === 0) return;
      await Promise.all(follows.map((f) => this.#follow(f.tenant, sessionId, f.subscription)));
      await this.#redis.hset(own, REFRESHED, String(now));
    });
  }

  async sessionsFor(update: UpdateTarget): Promise<string[]> {
    return (await this.sessionsForMany([update]))[0]!;
  }

  async sessionsForMany(updates: readonly UpdateTarget[]): Promise<string[][]> {
    // Every subscription of the update's tenant that can match
    // (subscription-store.ts candidateSubscriptions); each followers set read
    // once however many updates share it.
    const keyOf = new Map<string, number>();
    const perUpdate = updates.map((update) => {
      const tenant = updateTenant(update);
      return candidateSubscriptions(update).map((c) => {
        const key = this.#followers(tenant, c);
        let i = keyOf.get(key);
        if (i === undefined) {
          i = keyOf.size;
          keyOf.set(key, i);
        }
        return i;
      });
    });
    if (keyOf.size === 0) return [];
    const sets = await this.#guard(() => this.#readSets([...keyOf.keys()]));
    return perUpdate.map((indexes) => [...new Set(indexes.flatMap((i) => sets[i]!))].sort());
  }

  /**
   * The live followers of each key, in one round trip: a pipeline on a single
   * Redis; on Redis Cluster (whose pipelines must stay within one node) the
   * commands are all sent before the first answer, each to its node.
   */
  async #readSets(keys: string[]): Promise<string[][]> {
    const now = String(this.#clock.now());
    if (this.#cluster) return Promise.all(keys.map((key) => this.#redis.zrangebyscore(key, now, '+inf')));
    const pipeline = this.#redis.pipeline();
    for (const key of keys) pipeline.zrangebyscore(key, now, '+inf');
    const replies = await pipeline.exec();
    if (!replies) throw new Error('the followers pipeline was aborted');
    return replies.map(([err, members]) => {
      if (err) throw err;
      return members as string[];
    });
  }

  async close(): Promise<void> {
    if (this.#ownsClient) await this.#redis.quit();
  }

  async #guard<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (cause) {
      throw new CtxflowError('store_unavailable', 'the subscription store did not answer', { cause });
    }
  }
}

/** Subscriptions parsed so far (a step reads every one of its session's): frozen, shared, bounded. */
const parsed = new Map<string, Subscription>();

function parsedSubscription(id: string): Subscription {
  let subscription = parsed.get(id);
  if (subscription === undefined) {
    subscription = Object.freeze(parseSubscriptionId(id));
    if (parsed.size >= 50_000) parsed.clear();
    parsed.set(id, subscription);
  }
  return subscription;
}

function parseSubscriptionId(id: string): Subscription {
  const [source, ticket, scope] = JSON.parse(id) as [Subscription['source'], string, string | null];
  return scope === null ? { source, ticket } : { source, ticket, scope };
}
