import { type FeedSource, updateTenant } from '@ctxflow/contracts';
import {
  candidateSubscriptions,
  compareSubscriptions,
  type FeedFollow,
  type Subscription,
  type SubscriptionStore,
  subscriptionId,
  type UpdateTarget,
} from './subscription-store.ts';

/** Where a subscription starts: the memory feed streams's current position of a source. */
export interface SourcePositions {
  positionNow(tenant: string, source: FeedSource): number;
}

/**
 * Subscriptions in process memory: the embedded default. Nothing survives a
 * restart. The same two structures as the Redis adapter: each session's
 * subscriptions (with tenant and start position), and per tenant and
 * subscription (a stream) the sessions following it.
 *
 * Start positions come from the MemoryFeedStreams made with this store as its
 * `subscriptions` (it links itself); unlinked, every subscription starts at 0.
 */
export class MemorySubscriptionStore implements SubscriptionStore {
  /** sessionId -> subscriptionId -> the follow. */
  readonly #bySession = new Map<string, Map<string, FeedFollow>>();
  /** JSON [tenant, subscriptionId] -> the sessions following it. */
  readonly #subscribers = new Map<string, Set<string>>();
  /** sessionId -> clock time of its last subscribe or touch (retention). */
  readonly #touched = new Map<string, number>();
  readonly #ttlMs: number;
  readonly #clock: { now(): number };
  #positions: SourcePositions | undefined;

  /** `ttlMs`: retention (CTXFLOW_SESSION_TTL_MS): a session's subscriptions idle this long are gone. 0 (default): kept. */
  constructor(options: { ttlMs?: number; clock?: { now(): number } } = {}) {
    this.#ttlMs = options.ttlMs ?? 0;
    this.#clock = options.clock ?? { now: () => Date.now() };
  }

  /** Start positions from now on come from `positions` (MemoryFeedStreams links itself). */
  usePositions(positions: SourcePositions): void {
    this.#positions = positions;
  }

  /**
   * True when a session of `tenant` that has not expired follows `subscription`'s
   * stream (the feed stream store's check before it stores an update there). Expired
   * followers found on the way leave.
   */
  watched(tenant: string, subscription: Subscription): boolean {
    const key = indexKey(tenant, subscriptionId(subscription));
    const followers = this.#subscribers.get(key);
    if (!followers) return false;
    for (const sessionId of followers) {
      if (!this.#expired(sessionId)) return true;
    }
    return false;
  }

  /** Drops the session's subscriptions when idle past the retention; true when it did or they were gone. */
  #expired(sessionId: string): boolean {
    if (this.#ttlMs === 0) return false;
    const touched = this.#touched.get(sessionId);
    if (touched === undefined || this.#clock.now() - touched < this.#ttlMs) return false;
    this.#drop(sessionId);
    return true;
  }

  /** Removes the session from every subscriber set and its own subscriptions. */
  #drop(sessionId: string): void {
    for (const [key, followers] of this.#subscribers) {
      followers.delete(sessionId);
      if (followers.size === 0) this.#subscribers.delete(key);
    }
    this.#bySession.delete(sessionId);
    this.#touched.delete(sessionId);
  }

  async eraseSession(_tenant: string, sessionId: string): Promise<void> {
    this.#drop(sessionId);
  }

  async subscribe(tenant: string, sessionId: string, subscription: Subscription): Promise<boolean> {
    this.#expired(sessionId);
    this.#touched.set(sessionId, this.#clock.now());
    const id = subscriptionId(subscription);
    const key = indexKey(tenant, id);
    let followers = this.#subscribers.get(key);
    if (!followers) {
      followers = new Set();
      this.#subscribers.set(key, followers);
    }
    followers.add(sessionId);
    let subs = this.#bySession.get(sessionId);
    if (!subs) {
      subs = new Map();
      this.#bySession.set(sessionId, subs);
    }
    if (subs.has(id)) return false;
    const start = this.#positions?.positionNow(tenant, subscription.source) ?? 0;
    subs.set(id, { tenant, subscription: copyOf(subscription), start });
    return true;
  }

  async follows(sessionId: string): Promise<FeedFollow[]> {
    this.#expired(sessionId);
    return [...(this.#bySession.get(sessionId)?.values() ?? [])]
      .map((f) => ({ tenant: f.tenant, subscription: copyOf(f.subscription), start: f.start }))
      .sort((a, b) => compareSubscriptions(a.subscription, b.subscription));
  }

  async copySession(tenant: string, fromSessionId: string, toSessionId: string): Promise<void> {
    for (const follow of await this.follows(fromSessionId)) {
      const id = subscriptionId(follow.subscription);
      await this.subscribe(tenant, toSessionId, follow.subscription);
      const own = this.#bySession.get(toSessionId)!;
      const had = own.get(id)!;
      // The branch reads from its source's position: the earlier start of the two.
      own.set(id, { ...had, start: Math.min(had.start, follow.start) });
    }
  }

  async touch(sessionId: string): Promise<void> {
    if (this.#expired(sessionId) || !this.#bySession.has(sessionId)) return;
    this.#touched.set(sessionId, this.#clock.now());
  }

  async unsubscribe(tenant: string, sessionId: string, subscription: Subscription): Promise<boolean> {
    const id = subscriptionId(subscription);
    const subs = this.#bySession.get(sessionId);
    const removed = subs?.delete(id) ?? false;
    if (subs && subs.size === 0) this.#bySession.delete(sessionId);
    const key = indexKey(tenant, id);
    const followers = this.#subscribers.get(key);
    followers?.delete(sessionId);
    if (followers && followers.size === 0) this.#subscribers.delete(key);
    return removed;
  }

  async prune(update: UpdateTarget, sessionIds: readonly string[]): Promise<void> {
    const tenant = updateTenant(update);
    for (const sessionId of sessionIds) {
      this.#expired(sessionId);
      const own = this.#bySession.get(sessionId);
      for (const candidate of candidateSubscriptions(update)) {
        const id = subscriptionId(candidate);
        if (own?.has(id)) continue;
        const key = indexKey(tenant, id);
        const followers = this.#subscribers.get(key);
        followers?.delete(sessionId);
        if (followers && followers.size === 0) this.#subscribers.delete(key);
      }
    }
  }

  async list(sessionId: string): Promise<Subscription[]> {
    this.#expired(sessionId);
    return [...(this.#bySession.get(sessionId)?.values() ?? [])]
      .map((f) => copyOf(f.subscription))
      .sort(compareSubscriptions);
  }

  async sessionsFor(update: UpdateTarget): Promise<string[]> {
    const tenant = updateTenant(update);
    const sessions = new Set<string>();
    for (const candidate of candidateSubscriptions(update)) {
      for (const sessionId of this.#subscribers.get(indexKey(tenant, subscriptionId(candidate))) ?? []) {
        sessions.add(sessionId);
      }
    }
    for (const sessionId of sessions) if (this.#expired(sessionId)) sessions.delete(sessionId);
    return [...sessions].sort();
  }

  async sessionsForMany(updates: readonly UpdateTarget[]): Promise<string[][]> {
    return Promise.all(updates.map((update) => this.sessionsFor(update)));
  }
}

function indexKey(tenant: string, id: string): string {
  return JSON.stringify([tenant, id]);
}

function copyOf(subscription: Subscription): Subscription {
  const copy: Subscription = { source: subscription.source, ticket: subscription.ticket };
  if (subscription.scope !== undefined) copy.scope = subscription.scope;
  return copy;
}
