import { type FeedSource, type TicketUpdate, ticketKey } from '@ctxflow/contracts';

/** What a subscription look-up needs of an update; `tenant` absent: the single-tenant default. */
export type UpdateTarget = Pick<TicketUpdate, 'tenant' | 'source' | 'ticket' | 'scope'>;

/**
 * One subscription of a session to ticket updates.
 *
 * - Exact: `{ source, ticket }` matches updates with that source and ticket key
 *   (`owner/repo#12`, `PROJ-123`, `35436`, any string for generic).
 * - Wildcard: `{ source, ticket: '*', scope }` matches every update of that
 *   source whose `TicketUpdate.scope` equals `scope`: a GitHub repository
 *   (`owner/repo`), a Jira project (`PROJ`), a Zendesk account id. For github,
 *   jira and zendesk the scope is required: a wildcard never spans a whole
 *   ticket system.
 * - `{ source, ticket: '*' }` without a scope (any source but github, jira and
 *   zendesk) matches every update of that source: every generic or configured
 *   source's update (they carry no scope), every CloudEvents update.
 *
 * `scope` is only meaningful with `ticket: '*'`; an exact subscription never has one.
 */
export interface Subscription {
  source: FeedSource;
  ticket: string;
  scope?: string;
}

/** The wildcard ticket. */
export const ANY_TICKET = '*';

/** True when `subscription` matches `update` (the rule above; the tenant is the store's to compare). */
export function matchesUpdate(subscription: Subscription, update: Pick<TicketUpdate, 'source' | 'ticket' | 'scope'>) {
  if (subscription.source !== update.source) return false;
  if (subscription.ticket !== ANY_TICKET) return subscription.ticket === update.ticket;
  return subscription.scope === undefined || subscription.scope === update.scope;
}

/**
 * Every subscription that can match `update` (the rule above): the exact
 * ticket, the unscoped wildcard of its source and, when the update has a
 * scope, the wildcard of that scope. A store looks these up in its index.
 */
export function candidateSubscriptions(update: Pick<TicketUpdate, 'source' | 'ticket' | 'scope'>): Subscription[] {
  const candidates: Subscription[] = [
    { source: update.source, ticket: update.ticket },
    { source: update.source, ticket: ANY_TICKET },
  ];
  if (update.scope !== undefined) candidates.push({ source: update.source, ticket: ANY_TICKET, scope: update.scope });
  return candidates;
}

/** Identities made of subscription objects so far (a step names each of its session's). */
const ids = new WeakMap<Subscription, string>();

/** A stable identity of a subscription (for sets and sorting). */
export function subscriptionId(subscription: Subscription): string {
  if (Object.isFrozen(subscription)) {
    let id = ids.get(subscription);
    if (id === undefined) {
      id = JSON.stringify([subscription.source, subscription.ticket, subscription.scope ?? null]);
      ids.set(subscription, id);
    }
    return id;
  }
  return JSON.stringify([subscription.source, subscription.ticket, subscription.scope ?? null]);
}

/** Sorts subscriptions by source, ticket, scope: the order `list` answers in. */
export function compareSubscriptions(a: Subscription, b: Subscription): number {
  const ka = subscriptionId(a);
  const kb = subscriptionId(b);
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

/** A stream a session reads (step-context's feed streams): its subscription (tenant's), and the source position it started at. */
export interface FeedFollow {
  tenant: string;
  subscription: Subscription;
  /** The source's seq when the subscription was made: only entries after it are the session's. */
  start: number;
}

/** The key updates of one ticket share (`${source}:${ticket}`), the Kafka record key. */
export { ticketKey };

/**
 * Which sessions follow which streams, per tenant, and from which position
 * (the feed streams of step-context's feed stream store). Adapters:
 * memory-subscription-store.ts (embedded default), redis-subscription-store.ts;
 * both pass test/contract/subscription-store.contract.ts.
 *
 * Every subscription is made by a tenant (the session's owner: the caller,
 * subscription-routes.ts, checks that the session is the tenant's) and
 * matches only updates of that tenant (`TicketUpdate.tenant`, absent:
 * DEFAULT_TENANT), wildcards included: one tenant's ticket text never reaches
 * another tenant's session.
 */
export interface SubscriptionStore {
  /** Adds a subscription of `tenant`'s session; false when the session already had it (idempotent). */
  subscribe(tenant: string, sessionId: string, subscription: Subscription): Promise<boolean>;
  /** Removes a subscription of `tenant`'s session; false when the session did not have it. */
  unsubscribe(tenant: string, sessionId: string, subscription: Subscription): Promise<boolean>;
  /**
   * Erases the session's subscriptions: `tenant`'s subscriber sets no longer name it,
   * then its own set goes (so a retry after a failure finds what is left). Nothing
   * when it has none (idempotent).
   */
  eraseSession(tenant: string, sessionId: string): Promise<void>;
  /**
   * Removes from the subscriber sets `update` was matched against the sessions the
   * batch store found without any subscription (`unsubscribed`: expired or erased). A
   * session subscribed meanwhile keeps its entries: only the index entries of
   * subscriptions its own set lacks go. Safe to repeat.
   */
  prune(update: UpdateTarget, sessionIds: readonly string[]): Promise<void>;
  /** The session's subscriptions, sorted by source, ticket, scope. */
  list(sessionId: string): Promise<Subscription[]>;
  /**
   * The session's subscriptions with their tenant and the source position each
   * started at (the feed stream store's `positionOf` when it was made; re-subscribing
   * keeps it), sorted as `list`: the streams a step reads.
   */
  follows(sessionId: string): Promise<FeedFollow[]>;
  /**
   * A branch: `to` (of `tenant`) gets `from`'s subscriptions with the same start
   * positions; a subscription `to` already had starts at the earlier of the two. Safe to repeat.
   */
  copySession(tenant: string, fromSessionId: string, toSessionId: string): Promise<void>;
  /** Refreshes the retention of the session's subscriptions (a step read its feed); nothing without retention. */
  touch(sessionId: string): Promise<void>;
  /**
   * The sessions of the update's tenant with at least one subscription
   * matching `update` (exact or wildcard), each once, sorted by session id.
   */
  sessionsFor(update: UpdateTarget): Promise<string[]>;
  /**
   * `sessionsFor` of each update, in order, in one look-up (one round trip on
   * Redis, whatever the number of updates): what step-context asks once per
   * run of records it applies.
   */
  sessionsForMany(updates: readonly UpdateTarget[]): Promise<string[][]>;
  close?(): Promise<void>;
}
