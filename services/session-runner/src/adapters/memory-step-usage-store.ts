import type { StepUsage } from '../domain/provider-usage.ts';
import { type Clock, systemClock } from '../ports/clock.ts';
import type { RecordedUsage, StepUsageStore } from '../ports/step-usage-store.ts';
import { IdleSlots } from './idle-slots.ts';

export interface MemoryStepUsageStoreOptions {
  /** Retention in ms after a session's last report (CTXFLOW_SESSION_TTL_MS); 0 (default): kept. */
  ttlMs?: number;
  clock?: Clock;
}

interface Slot {
  /** stepId -> the report as JSON (copied in and out). */
  reports: Map<string, string>;
  /** Clock time of the last report (retention). */
  touched: number;
}

/** The embedded default: each method runs without an await between its check and its write. */
export class MemoryStepUsageStore implements StepUsageStore {
  readonly #idle: IdleSlots<Slot>;
  readonly #sessions: Map<string, Slot>;
  readonly #ttlMs: number;
  readonly #clock: Clock;

  constructor(options: MemoryStepUsageStoreOptions = {}) {
    this.#ttlMs = options.ttlMs ?? 0;
    this.#clock = options.clock ?? systemClock;
    this.#idle = new IdleSlots(this.#ttlMs, this.#clock);
    this.#sessions = this.#idle.slots;
  }

  #live(sessionId: string): Slot | undefined {
    return this.#idle.live(sessionId);
  }

  async record(sessionId: string, usage: StepUsage): Promise<RecordedUsage> {
    let slot = this.#live(sessionId);
    if (!slot) {
      slot = { reports: new Map(), touched: 0 };
      this.#sessions.set(sessionId, slot);
    }
    slot.touched = this.#clock.now();
    const known = slot.reports.get(usage.stepId);
    if (known !== undefined) return { recorded: false, usage: JSON.parse(known) as StepUsage };
    slot.reports.set(usage.stepId, JSON.stringify(usage));
    return { recorded: true, usage: JSON.parse(JSON.stringify(usage)) as StepUsage };
  }

  async get(sessionId: string, stepId: string): Promise<StepUsage | undefined> {
    const json = this.#live(sessionId)?.reports.get(stepId);
    return json === undefined ? undefined : (JSON.parse(json) as StepUsage);
  }

  async list(sessionId: string): Promise<StepUsage[]> {
    const slot = this.#live(sessionId);
    if (!slot) return [];
    return [...slot.reports.values()]
      .map((json) => JSON.parse(json) as StepUsage)
      .sort((a, b) => a.ordinal - b.ordinal);
  }

  async deleteSession(sessionId: string): Promise<void> {
    this.#sessions.delete(sessionId);
  }
}
