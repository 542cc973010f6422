import type { LogEntry, RowEntry } from '../domain/model.ts';
import { type OutboxEntry, outboxRows, type RowOutbox, shardOf } from '../ports/row-outbox.ts';

export interface MemoryRowOutboxOptions {
  /**
   * CTXFLOW_CONTEXT_ROW_EVENTS (default true): every row is taken; false: only the rows that
   * carry ticket updates (the receipts').
   */
  events?: boolean;
  /** Shards the sessions are spread over (CTXFLOW_CONTEXT_ROW_SHARDS); default 4. */
  shards?: number;
}

/**
 * The in-process outbox of the embedded default: MemorySessionStore appends a
 * commit's rows here in the same synchronous write as the commit, so a commit
 * and its entries exist together (and are lost together with the process).
 * One process holds every shard: `lease` always answers true.
 */
export class MemoryRowOutbox implements RowOutbox {
  readonly shards: number;
  /** Per shard, ref -> entry, in commit order. */
  readonly #entries: Map<string, OutboxEntry>[];
  readonly #listeners: (() => void)[] = [];
  readonly #events: boolean;
  #next = 0;

  constructor(options: MemoryRowOutboxOptions = {}) {
    this.#events = options.events ?? true;
    this.shards = options.shards ?? 4;
    this.#entries = Array.from({ length: this.shards }, () => new Map());
  }

  /** The store's write: one entry per context row of `rows` this outbox takes (messages have none). */
  append(tenant: string, sessionId: string, rows: readonly LogEntry[], requestId?: string): void {
    const taken = outboxRows(rows, this.#events);
    const shard = this.#entries[shardOf(sessionId, this.shards)]!;
    for (const i of taken) {
      this.#next += 1;
      const ref = String(this.#next);
      const entry: OutboxEntry = { ref, tenant, sessionId, row: structuredClone(rows[i]) as RowEntry };
      if (requestId) entry.requestId = requestId;
      shard.set(ref, entry);
    }
    if (taken.length > 0) for (const listener of this.#listeners) queueMicrotask(listener);
  }

  async lease(_shard: number): Promise<boolean> {
    return true;
  }

  async release(_shard: number): Promise<void> {}

  async pending(shard: number, max: number): Promise<OutboxEntry[]> {
    const out: OutboxEntry[] = [];
    for (const entry of this.#entries[shard]?.values() ?? []) {
      if (out.length >= max) break;
      out.push(entry);
    }
    return out;
  }

  async acknowledge(entries: readonly Pick<OutboxEntry, 'sessionId' | 'ref'>[]): Promise<void> {
    for (const { sessionId, ref } of entries) this.#entries[shardOf(sessionId, this.shards)]?.delete(ref);
  }

  onAppend(listener: () => void): void {
    this.#listeners.push(listener);
  }
}
