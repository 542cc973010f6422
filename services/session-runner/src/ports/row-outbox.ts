import { createHash } from 'node:crypto';
import type { LogEntry, RowEntry } from '../domain/model.ts';

/** One committed context row waiting for its event to be published, or its receipts to be recorded. */
export interface OutboxEntry {
  /** The adapter's handle of the entry; `acknowledge` names entries by it (with the session). */
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
 * hook rows that carry ticket updates (`outboxRows`). Sessions are spread over a fixed
 * number of shards (`shardOf`); a relay reads a shard's entries only while it holds the
 * shard's lease. A ref is never given to two entries of one session, so removing refs
 * already removed removes nothing else. Adapters: memory-row-outbox.ts (the embedded
 * default), redis-row-outbox.ts.
 */
export interface RowOutbox {
  /** How many shards the sessions are spread over. */
  readonly shards: number;
  /**
   * Takes or renews this relay's lease of `shard`; true while it holds it.
   * Another relay takes the shard only once the lease ran out or was released.
   */
  lease(shard: number): Promise<boolean>;
  /** Gives the lease of `shard` up (the relay stops): another relay may take it at once. */
  release(shard: number): Promise<void>;
  /**
   * Up to `max` entries of `shard` not yet acknowledged, in commit order per
   * session. An entry is handed out again until it is acknowledged.
   */
  pending(shard: number, max: number): Promise<OutboxEntry[]>;
  /** Removes entries (by session and ref); entries already removed are ignored. */
  acknowledge(entries: readonly Pick<OutboxEntry, 'sessionId' | 'ref'>[]): Promise<void>;
  /** `listener` is called after a commit of this process wrote entries (the relay wakes at once). */
  onAppend(listener: () => void): void;
}

/** The shard of a session: the first 32 bits of the SHA-1 of its id, modulo `shards`. */
export function shardOf(sessionId: string, shards: number): number {
  return createHash('sha1').update(sessionId).digest().readUInt32BE(0) % shards;
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
