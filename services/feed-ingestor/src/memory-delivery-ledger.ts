import type { ClaimOutcome, DeliveryLedger } from './delivery-ledger.ts';

interface Entry {
  state: 'pending' | 'done';
  /** Epoch milliseconds after which the entry no longer counts. */
  expiresAt: number;
}

/**
 * In-process ledger for the embedded mode: the same lease and retention rules
 * as the Redis adapter, lost on restart. Expired entries are swept on claim.
 */
export class MemoryDeliveryLedger implements DeliveryLedger {
  readonly #entries = new Map<string, Entry>();
  readonly #clock: () => number;
  #claimsSinceSweep = 0;

  constructor(options: { clock?: () => number } = {}) {
    this.#clock = options.clock ?? Date.now;
  }

  async claim(id: string, leaseMs: number): Promise<ClaimOutcome> {
    const now = this.#clock();
    if (++this.#claimsSinceSweep >= 1024) this.#sweep(now);
    const entry = this.#entries.get(id);
    if (entry && entry.expiresAt > now) return entry.state === 'done' ? 'done' : 'in_flight';
    this.#entries.set(id, { state: 'pending', expiresAt: now + leaseMs });
    return 'claimed';
  }

  async confirm(id: string, retainMs: number): Promise<void> {
    this.#entries.set(id, { state: 'done', expiresAt: this.#clock() + retainMs });
  }

  async release(id: string): Promise<void> {
    if (this.#entries.get(id)?.state === 'pending') this.#entries.delete(id);
  }

  async close(): Promise<void> {
    this.#entries.clear();
  }

  #sweep(now: number): void {
    this.#claimsSinceSweep = 0;
    for (const [id, entry] of this.#entries) if (entry.expiresAt <= now) this.#entries.delete(id);
  }
}
