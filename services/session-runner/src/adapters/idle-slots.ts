import type { Clock } from '../ports/clock.ts';

/** Sweeps for idle sessions at most this often (ms), and at least once per retention. */
const SWEEP_EVERY_MS = 60_000;

/**
 * Per-session slots of an in-memory store with a retention: a slot no write touched for
 * `ttlMs` of clock time is gone. `live` drops an idle slot when it is asked for (lazily),
 * and every SWEEP_EVERY_MS (or retention, if shorter) its first call drops every idle one.
 * `ttlMs` 0 keeps slots until they are deleted.
 */
export class IdleSlots<S extends { touched: number }> {
  readonly slots = new Map<string, S>();
  readonly #ttlMs: number;
  readonly #clock: Clock;
  #sweptAt: number;

  constructor(ttlMs: number, clock: Clock) {
    this.#ttlMs = ttlMs;
    this.#clock = clock;
    this.#sweptAt = clock.now();
  }

  live(id: string): S | undefined {
    if (this.#ttlMs === 0) return this.slots.get(id);
    const now = this.#clock.now();
    if (now - this.#sweptAt >= Math.min(SWEEP_EVERY_MS, this.#ttlMs)) {
      this.#sweptAt = now;
      for (const [key, slot] of this.slots) if (now - slot.touched >= this.#ttlMs) this.slots.delete(key);
    }
    const slot = this.slots.get(id);
    if (slot && now - slot.touched >= this.#ttlMs) {
      this.slots.delete(id);
      return undefined;
    }
    return slot;
  }
}
