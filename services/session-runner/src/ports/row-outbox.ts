import type { RowEntry } from '../domain/model.ts';

/** One committed context row waiting for its event to be published. */
export interface OutboxEntry {
  /** The adapter's handle of the entry; `acknowledge` names entries by it. */
  ref: string;
  tenant: string;
  sessionId: string;
  row: RowEntry;
}

/**
 * The outbox of committed context rows (CTXFLOW_CONTEXT_ROW_EVENTS): the session
 * store writes one entry per committed row in the same atomic write as the
 * commit, and the relay (context-row-relay.ts) publishes them. Adapters:
 * memory-row-outbox.ts (the embedded default), redis-row-outbox.ts.
 */
export interface RowOutbox {
  /**
   * Up to `max` entries not yet acknowledged, in commit order per session. An
   * entry is handed out again (to this or another relay) until it is
   * acknowledged, so an entry whose publish was cut short by a crash is
   * published again: consumers keep the first event per id.
   */
  pending(max: number): Promise<OutboxEntry[]>;
  /** Removes entries whose events the bus acknowledged; entries already removed are ignored. */
  acknowledge(entries: readonly OutboxEntry[]): Promise<void>;
  /** `listener` is called after a commit of this process wrote entries (the relay wakes at once). */
  onAppend(listener: () => void): void;
}
