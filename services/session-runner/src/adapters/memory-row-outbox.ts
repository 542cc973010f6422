import type { LogEntry, RowEntry } from '../domain/model.ts';
import type { OutboxEntry, RowOutbox } from '../ports/row-outbox.ts';

/**
 * The in-process outbox of the embedded default: MemorySessionStore appends a
 * commit's rows here in the same synchronous write as the commit, so a commit
 * and its entries exist together (and are lost together with the process).
 */
export class MemoryRowOutbox implements RowOutbox {
  readonly #entries = new Map<string, OutboxEntry>();
  readonly #listeners: (() => void)[] = [];
  #next = 0;

  /** The store's write: one entry per context row of `rows` (messages have none). */
  append(tenant: string, sessionId: string, rows: readonly LogEntry[]): void {
    let added = false;
    for (const row of rows) {
      if (row.type !== 'row') continue;
      this.#next += 1;
      const ref = String(this.#next);
      this.#entries.set(ref, { ref, tenant, sessionId, row: structuredClone(row) as RowEntry });
      added = true;
    }
    if (added) for (const listener of this.#listeners) queueMicrotask(listener);
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
