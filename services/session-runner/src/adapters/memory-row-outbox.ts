import type { LogEntry, RowEntry } from '../domain/model.ts';
import { type OutboxEntry, outboxRows, type RowOutbox } from '../ports/row-outbox.ts';

/**
 * The in-process outbox of the embedded default: MemorySessionStore appends a
 * commit's rows here in the same synchronous write as the commit, so a commit
 * and its entries exist together (and are lost together with the process).
 */
export class MemoryRowOutbox implements RowOutbox {
  readonly #entries = new Map<string, OutboxEntry>();
  readonly #listeners: (() => void)[] = [];
  readonly #events: boolean;
  #next = 0;

  /**
   * `events` (CTXFLOW_CONTEXT_ROW_EVENTS; default true): every row is taken; false: only the
   * rows that carry ticket updates (the receipts').
   */
  constructor(options: { events?: boolean } = {}) {
    this.#events = options.events ?? true;
  }

  /** The store's write: one entry per context row of `rows` this outbox takes (messages have none). */
  append(tenant: string, sessionId: string, rows: readonly LogEntry[], requestId?: string): void {
    const taken = outboxRows(rows, this.#events);
    for (const i of taken) {
      this.#next += 1;
      const ref = String(this.#next);
      const entry: OutboxEntry = { ref, tenant, sessionId, row: structuredClone(rows[i]) as RowEntry };
      if (requestId) entry.requestId = requestId;
      this.#entries.set(ref, entry);
    }
    if (taken.length > 0) for (const listener of this.#listeners) queueMicrotask(listener);
  }

  async pending(max: number): Promise<OutboxEntry[]> {
    const out: OutboxEntry[] = [];
    for (const entry of this.#entries.values()) {
      if (out.length >= max) break;
      out.push(entry);
    }
    return out;
  }

  async acknowledge(entries: readonly OutboxEntry[]): Promise<void> {
    for (const { ref } of entries) this.#entries.delete(ref);
  }

  onAppend(listener: () => void): void {
    this.#listeners.push(listener);
  }
}
