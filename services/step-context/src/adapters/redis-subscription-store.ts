import { CtxflowError, updateTenant } from '@ctxflow/contracts';
import type { Cluster, Redis } from 'ioredis';
import {
  candidateSubscriptions,
  compareSubscriptions,
  type Subscription,
  type SubscriptionStore,
  subscriptionId,
  type UpdateTarget,
} from '../ports/subscription-store.ts';
import { type StepContextKeys, stepContextKeys } from './redis/keys.ts';

/**
 * Subscriptions on Redis: the session's own set (under its hash tag) and, per
 * tenant and subscription, a set of subscriber session ids that `sessionsFor`
 * reads (only the update's tenant's sets are read).
 *
 * The two live in different hash slots, so no single script can write both on
 * Redis Cluster. The order makes every partial write harmless and a retry
 * complete: `subscribe` adds to the subscriber set first, then to the
 * session's set (a crash between them leaves a session that already receives
 * updates, and the retry lists it); `unsubscribe` removes from the session's
 * set first, then from the subscriber set. `eraseSession` removes the session
 * from the subscriber sets first and deletes its own set last: the session
 * stays subscribed (and the batch store's `subscribedOnly` check lets updates
 * in) until nothing names it, and a retry finds every subscription left.
 * With `ttlMs`, the session's set gets that TTL at each subscribe (the batch
 * store refreshes it with the session's other keys).
 */
export class RedisSubscriptionStore implements SubscriptionStore {
  readonly #redis: Redis | Cluster;
  readonly #keys: StepContextKeys;
  readonly #ownsClient: boolean;
  readonly #cluster: boolean;
  readonly #ttlMs: number;

  /** `cluster`: detected from the client unless given. `ttlMs`: retention (CTXFLOW_SESSION_TTL_MS; default 0, kept). */
  constructor(options: {
    redis: Redis | Cluster;
    prefix?: string;
    ownsClient?: boolean;
    cluster?: boolean;
    ttlMs?: number;
  }) {
    this.#redis = options.redis;
    this.#keys = stepContextKeys(options.prefix ?? 'ctxflow');
    this.#ownsClient = options.ownsClient ?? false;
    this.#cluster = options.cluster ?? (options.redis as { isCluster?: boolean }).isCluster === true;
    this.#ttlMs = options.ttlMs ?? 0;
  }

  async subscribe(tenant: string, sessionId: string, subscription: Subscription): Promise<boolean> {
    const id = subscriptionId(subscription);
    return this.#guard(async () => {
      const index = this.#keys.subscribers(tenant, id);
      await this.#redis.sadd(index, sessionId);
      const own = this.#keys.session(sessionId).subscriptions;
      const added = (await this.#redis.sadd(own, id)) === 1;
      if (this.#ttlMs > 0) await this.#redis.pexpire(own, this.#ttlMs);
      // Again after the session's set: a prune that removed the entry in between is undone (see prune).
      await this.#redis.sadd(index, sessionId);
      return added;
    });
  }

  async eraseSession(tenant: string, sessionId: string): Promise<void> {
    const own = this.#keys.session(sessionId).subscriptions;
    await this.#guard(async () => {
      const ids = await this.#redis.smembers(own);
      await Promise.all(ids.map((id) => this.#redis.srem(this.#keys.subscribers(tenant, id), sessionId)));
      await this.#redis.del(own);
    });
  }

  async unsubscribe(tenant: string, sessionId: string, subscription: Subscription): Promise<boolean> {
    const id = subscriptionId(subscription);
    return this.#guard(async () => {
      const removed = (await this.#redis.srem(this.#keys.session(sessionId).subscriptions, id)) === 1;
      await this.#redis.srem(this.#keys.subscribers(tenant, id), sessionId);
      return removed;
    });
  }

  /**
   * Per session: SREM from the update's candidate subscriber sets, THEN read the
   * session's own set and SADD back the entries of the subscriptions it holds. With
   * subscribe's order (index, own set, index again) no interleaving loses an entry:
   * a prune removal after subscribe's last SADD reads the own set after it was written.
   */
  async prune(update: UpdateTarget, sessionIds: readonly string[]): Promise<void> {
    if (sessionIds.length === 0) return;
    const tenant = updateTenant(update);
    const sets = candidateSubscriptions(update).map((c) => {
      const id = subscriptionId(c);
      return { id, key: this.#keys.subscribers(tenant, id) };
    });
    await this.#guard(() =>
      Promise.all(
        sessionIds.map(async (sessionId) => {
          await Promise.all(sets.map(({ key }) => this.#redis.srem(key, sessionId)));
          const own = new Set(await this.#redis.smembers(this.#keys.session(sessionId).subscriptions));
          await Promise.all(sets.filter(({ id }) => own.has(id)).map(({ key }) => this.#redis.sadd(key, sessionId)));
        }),
      ),
    );
  }

  async list(sessionId: string): Promise<Subscription[]> {
    const ids = await this.#guard(() => this.#redis.smembers(this.#keys.session(sessionId).subscriptions));
    return ids.map(parseSubscriptionId).sort(compareSubscriptions);
  }

  async sessionsFor(update: UpdateTarget): Promise<string[]> {
    return (await this.sessionsForMany([update]))[0]!;
  }

  async sessionsForMany(updates: readonly UpdateTarget[]): Promise<string[][]> {
    // Every subscription of the update's tenant that can match
    // (subscription-store.ts candidateSubscriptions); each subscriber set read
    // once however many updates share it.
    const keyOf = new Map<string, number>();
    const perUpdate = updates.map((update) => {
      const tenant = updateTenant(update);
      return candidateSubscriptions(update).map((c) => {
        const key = this.#keys.subscribers(tenant, subscriptionId(c));
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
   * SMEMBERS of each key, in one round trip: a pipeline on a single Redis; on
   * Redis Cluster (whose pipelines must stay within one node) the commands are
   * all sent before the first answer, each to its node.
   */
  async #readSets(keys: string[]): Promise<string[][]> {
    if (this.#cluster) return Promise.all(keys.map((key) => this.#redis.smembers(key)));
    const pipeline = this.#redis.pipeline();
    for (const key of keys) pipeline.smembers(key);
    const replies = await pipeline.exec();
    if (!replies) throw new Error('the subscriber pipeline was aborted');
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

function parseSubscriptionId(id: string): Subscription {
  const [source, ticket, scope] = JSON.parse(id) as [Subscription['source'], string, string | null];
  return scope === null ? { source, ticket } : { source, ticket, scope };
}
