/**
 * The delivery ledger port: remembers which webhook deliveries were already
 * handed to the bus, so a repeated delivery is answered 202 and published once.
 *
 * A delivery id is `${source}:${eventId}` (GitHub: the `X-GitHub-Delivery` id).
 * The life of one id: `claim` takes a short lease before publishing; `confirm`
 * after the bus acknowledged turns it into a long-lived "done" mark; `release`
 * after a failed publish drops the lease so the sender's retry can publish.
 * Adapters: adapters/memory-delivery-ledger.ts (embedded default), adapters/redis-delivery-ledger.ts.
 */

/** What a claim found. */
export type ClaimOutcome =
  /** Nobody holds this id: the caller owns it until `confirm`, `release` or the lease ends. */
  | 'claimed'
  /** Another request holds a live lease on this id and has not confirmed yet. */
  | 'in_flight'
  /** The id was confirmed within its retention: publish nothing. */
  | 'done';

/** How long a published delivery id is remembered, in milliseconds (72 h: GitHub keeps deliveries 3 days). */
export const DEFAULT_RETAIN_MS = 72 * 60 * 60 * 1000;

/**
 * What the ledger holds for an id now: `in_flight` (claimed, its publish not confirmed and
 * the lease not ended), `done` (confirmed, within its retention), or undefined (never
 * claimed, released, or its lease or retention ended).
 */
export type LedgerState = 'in_flight' | 'done' | undefined;

export interface DeliveryLedger {
  /**
   * Takes the id for `leaseMs` milliseconds if nobody holds it and it was not
   * confirmed. A lease that ends unconfirmed (a crashed request) frees the id.
   */
  claim(id: string, leaseMs: number): Promise<ClaimOutcome>;
  /** Marks the id done for `retainMs` milliseconds; later claims answer `done`. */
  confirm(id: string, retainMs: number): Promise<void>;
  /** Drops an unconfirmed lease so the next claim succeeds; a confirmed id stays done. */
  release(id: string): Promise<void>;
  /** The id's state, read only (the receipts route): nothing is claimed or extended. */
  state(id: string): Promise<LedgerState>;
  close(): Promise<void>;
}
