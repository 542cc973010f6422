import type { ClaimOutcome, DeliveryLedger } from './delivery-ledger.ts';

interface Entry {
  state: 'pending' | 'done';
  /** Epoch milliseconds after which the entry no longer counts. */
  expiresAt: number;
}

/** When one written entry ends. Stale once its id was written again or released. */
interface End {
  at: number;
  id: string;
  entry: Entry;
}

/**
 * In-process ledger for the embedded mode: the same lease and retention rules
 * as the Redis adapter, lost on restart. Every claim first drops the entries
 * that ended, earliest first (a min-heap of end times), as Redis expires its
 * keys: the work per delivery does not grow with the ids retained.
 */
export class MemoryDeliveryLedger implements DeliveryLedger {
  readonly #entries = new Map<string, Entry>();
  /** Binary min-heap by `at` of every write of #entries. */
  readonly #ends: End[] = [];
  readonly #clock: () => number;

  constructor(options: { clock?: () => number } = {}) {
    this.#clock = options.clock ?? Date.now;
  }

  async claim(id: string, leaseMs: number): Promise<ClaimOutcome> {
    const now = this.#clock();
    this.#sweep(now);
    const entry = this.#entries.get(id);
    if (entry && entry.expiresAt > now) return entry.state === 'done' ? 'done' : 'in_flight';
    this.#write(id, { state: 'pending', expiresAt: now + leaseMs });
    return 'claimed';
  }

  async confirm(id: string, retainMs: number): Promise<void> {
    this.#write(id, { state: 'done', expiresAt: this.#clock() + retainMs });
  }

  async release(id: string): Promise<void> {
    if (this.#entries.get(id)?.state === 'pending') this.#entries.delete(id);
  }

  /** Ids held: live ones and ended ones not swept yet (a claim sweeps). */
  get size(): number {
    return this.#entries.size;
  }

  async close(): Promise<void> {
    this.#entries.clear();
    this.#ends.length = 0;
  }

  #write(id: string, entry: Entry): void {
    this.#entries.set(id, entry);
    const ends = this.#ends;
    // Sift up: a later end (the usual case, the clock moving on) stays where it lands.
    let i = ends.length;
    const end: End = { at: entry.expiresAt, id, entry };
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (ends[parent]!.at <= end.at) break;
      ends[i] = ends[parent]!;
      i = parent;
    }
    ends[i] = end;
  }

  /** Drops every entry that ended at or before `now`. */
  #sweep(now: number): void {
    const ends = this.#ends;
    while (ends.length > 0 && ends[0]!.at <= now) {
      const { id, entry } = ends[0]!;
      if (this.#entries.get(id) === entry) this.#entries.delete(id);
      const last = ends.pop()!;
      if (ends.length === 0) break;
      // Sift down the last end from the root.
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        if (left >= ends.length) break;
        const right = left + 1;
        const child = right < ends.length && ends[right]!.at < ends[left]!.at ? right : left;
        if (ends[child]!.at >= last.at) break;
        ends[i] = ends[child]!;
        i = child;
      }
      ends[i] = last;
    }
  }
}
