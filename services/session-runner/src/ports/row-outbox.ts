import type { LogEntry, RowEntry } from '../domain/model.ts';

/** One committed context row waiting for its event to be published, or its receipts to be recorded. */
export interface OutboxEntry {
  /** The adapter's handle of the entry; `acknowledge` names entries by it. */
  ref: string;
  tenant: string;
  sessionId: string;
  row: RowEntry;
  /** The request id of the step that committed the row, when its runtime sent one. */
  requestId?: string;
}

/**
 * The outbox of committed context rows: the session store writes one entry per committed
 * row in the same atomic write as the commit, and the relay (context-row-relay.ts) hands
 * them to the receipts (delivery-receipts.ts) and, with CTXFLOW_CONTEXT_ROW_EVENTS,
 * publishes them. Which rows an outbox takes: every row with events on, else only the
 * hook rows that carry ticket updates (`outboxRows`). Adapters: memory-row-outbox.ts (the
 * embedded default), redis-row-outbox.ts.
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

/** Whether a committed entry is a row that names ticket updates (a hook notice: its receipts). */
export function carriesTicketUpdates(entry: LogEntry): entry is RowEntry {
  return entry.type === 'row' && (entry.row.ticketUpdates?.length ?? 0) > 0;
}

/**
 * The indexes in `entries` (a commit's) of what its outbox takes: every context row with
 * `events` on, else only the rows that carry ticket updates.
 */
export function outboxRows(entries: readonly LogEntry[], events: boolean): number[] {
  const taken: number[] = [];
  for (const [i, entry] of entries.entries()) {
    if (events ? entry.type === 'row' : carriesTicketUpdates(entry)) taken.push(i);
  }
  return taken;
}
