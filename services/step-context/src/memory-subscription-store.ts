import type { TicketUpdate } from '@ctxflow/contracts';
import {
  compareSubscriptions,
  matchesUpdate,
  type Subscription,
  type SubscriptionStore,
  subscriptionId,
} from './subscription-store.ts';

/** Subscriptions in process memory: the embedded default. Nothing survives a restart. */
export class MemorySubscriptionStore implements SubscriptionStore {
  /** sessionId -> subscriptionId -> subscription. */
  readonly #bySession = new Map<string, Map<string, Subscription>>();

  async subscribe(sessionId: string, subscription: Subscription): Promise<boolean> {
    let subs = this.#bySession.get(sessionId);
    if (!subs) {
      subs = new Map();
      this.#bySession.set(sessionId, subs);
    }
    const id = subscriptionId(subscription);
    if (subs.has(id)) return false;
    subs.set(id, copyOf(subscription));
    return true;
  }

  async unsubscribe(sessionId: string, subscription: Subscription): Promise<boolean> {
    const subs = this.#bySession.get(sessionId);
    const removed = subs?.delete(subscriptionId(subscription)) ?? false;
    if (subs && subs.size === 0) this.#bySession.delete(sessionId);
    return removed;
  }

  async list(sessionId: string): Promise<Subscription[]> {
    return [...(this.#bySession.get(sessionId)?.values() ?? [])].map(copyOf).sort(compareSubscriptions);
  }

  async sessionsFor(update: Pick<TicketUpdate, 'source' | 'ticket' | 'scope'>): Promise<string[]> {
    const sessions: string[] = [];
    for (const [sessionId, subs] of this.#bySession) {
      for (const sub of subs.values()) {
        if (matchesUpdate(sub, update)) {
          sessions.push(sessionId);
          break;
        }
      }
    }
    return sessions.sort();
  }

  async sessionsForMany(updates: readonly Pick<TicketUpdate, 'source' | 'ticket' | 'scope'>[]): Promise<string[][]> {
    return Promise.all(updates.map((update) => this.sessionsFor(update)));
  }
}

function copyOf(subscription: Subscription): Subscription {
  const copy: Subscription = { source: subscription.source, ticket: subscription.ticket };
  if (subscription.scope !== undefined) copy.scope = subscription.scope;
  return copy;
}
