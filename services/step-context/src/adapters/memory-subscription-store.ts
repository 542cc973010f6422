import { updateTenant } from '@ctxflow/contracts';
import {
  candidateSubscriptions,
  compareSubscriptions,
  type Subscription,
  type SubscriptionStore,
  subscriptionId,
  type UpdateTarget,
} from '../ports/subscription-store.ts';

/**
 * Subscriptions in process memory: the embedded default. Nothing survives a
 * restart. The same two structures as the Redis adapter: each session's
 * subscriptions, and per tenant and subscription the sessions following it.
 */
export class MemorySubscriptionStore implements SubscriptionStore {
  /** sessionId -> subscriptionId -> subscription. */
  readonly #bySession = new Map<string, Map<string, Subscription>>();
  /** JSON [tenant, subscriptionId] -> the sessions following it. */
  readonly #subscribers = new Map<string, Set<string>>();
  /** sessionId -> clock time of its last subscribe or `holds` (retention). */
  readonly #touched = new Map<string, number>();
  readonly #ttlMs: number;
  readonly #clock: { now(): number };

  /** `ttlMs`: retention (CTXFLOW_SESSION_TTL_MS): a session's subscriptions idle this long are gone. 0 (default): kept. */
  constructor(options: { ttlMs?: number; clock?: { now(): number } } = {}) {
    this.#ttlMs = options.ttlMs ?? 0;
    this.#clock = options.clock ?? { now: () => Date.now() };
  }

  /**
   * True when the session has a subscription (the batch store's `subscribed` check of
   * an update being applied to it, which refreshes its retention as a write does).
   */
  holds(sessionId: string): boolean {
    if (this.#expired(sessionId) || !this.#bySession.has(sessionId)) return false;
    this.#touched.set(sessionId, this.#clock.now());
    return true;
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
    subs.set(id, copyOf(subscription));
    return true;
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
    return [...(this.#bySession.get(sessionId)?.values() ?? [])].map(copyOf).sort(compareSubscriptions);
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
