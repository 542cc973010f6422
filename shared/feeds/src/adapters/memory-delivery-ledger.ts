import type { ClaimOutcome, DeliveryLedger, LedgerState } from '../ports/delivery-ledger.ts';

interface Entry {
  readonly id: string;
  readonly state: 'pending' | 'done';
  /** Epoch milliseconds after which the entry no longer counts. */
  readonly expiresAt: number;
}

/**
 * The entries written in one state, oldest first (an array read from `head`,
 * compacted as it drains). An entry here may be stale: its id was written
 * again since, or released.
 */
class WriteQueue {
  #entries: Entry[] = [];
  #head = 0;

  push(entry: Entry): void {
    this.#entries.push(entry);
  }

  peek(): Entry | undefined {
    return this.#entries[this.#head];
  }

  shift(): void {
    this.#head += 1;
    if (this.#head >= 1024 && this.#head * 2 >= this.#entries.length) {
      this.#entries = this.#entries.slice(this.#head);
      this.#head = 0;
    }
  }

  clear(): void {
    this.#entries = [];
    this.#head = 0;
  }
}

/**
 * In-process ledger for the embedded mode: the same lease and retention rules
 * as the Redis adapter, lost on restart. Every claim first drops the entries
 * that ended, as Redis expires its keys, looking only at the oldest writes of
 * each state: with one lease and one retention, as the feed routes use, the
 * order of writes is the order of ends, and the work per delivery does not
 * grow with the ids retained. (With mixed durations a longer one ahead delays
 * dropping shorter ones behind it; an ended entry never counts either way.)
 */
export class MemoryDeliveryLedger implements DeliveryLedger {
  readonly #entries = new Map<string, Entry>();
  readonly #pending = new WriteQueue();
  readonly #done = new WriteQueue();
  readonly #clock: () => number;

  constructor(options: { clock?: () => number } = {}) {
    this.#clock = options.clock ?? Date.now;
  }

  async claim(id: string, leaseMs: number): Promise<ClaimOutcome> {
    const now = this.#clock();
    this.#sweep(this.#pending, now);
    this.#sweep(this.#done, now);
    const entry = this.#entries.get(id);
    if (entry && entry.expiresAt > now) return entry.state === 'done' ? 'done' : 'in_flight';
    this.#write(this.#pending, { id, state: 'pending', expiresAt: now + leaseMs });
    return 'claimed';
  }

  async confirm(id: string, retainMs: number): Promise<void> {
    this.#write(this.#done, { id, state: 'done', expiresAt: this.#clock() + retainMs });
  }

  async release(id: string): Promise<void> {
    if (this.#entries.get(id)?.state === 'pending') this.#entries.delete(id);
  }

  async state(id: string): Promise<LedgerState> {
    const entry = this.#entries.get(id);
    if (!entry || entry.expiresAt <= this.#clock()) return undefined;
    return entry.state === 'done' ? 'done' : 'in_flight';
  }

  /** Ids held: live ones and ended ones not dropped yet (a claim drops them). */
  get size(): number {
    return this.#entries.size;
  }

  async close(): Promise<void> {
    this.#entries.clear();
    this.#pending.clear();
    this.#done.clear();
  }

  #write(queue: WriteQueue, entry: Entry): void {
    this.#entries.set(entry.id, entry);
    queue.push(entry);
  }

  /** Drops the ended entries at the front of `queue`, up to the first that still counts. */
  #sweep(queue: WriteQueue, now: number): void {
    for (let entry = queue.peek(); entry !== undefined; entry = queue.peek()) {
      // Stale (written again or released since): the id's own entry is elsewhere or gone.
      if (this.#entries.get(entry.id) === entry) {
        if (entry.expiresAt > now) return;
        this.#entries.delete(entry.id);
      }
      queue.shift();
    }
  }
}
