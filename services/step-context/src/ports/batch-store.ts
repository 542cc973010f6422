import type { TicketUpdate } from '@ctxflow/contracts';

/**
 * One entry of a session's batch stream: a ticket update as it was applied to
 * that session, stamped with its cursor. Cursors are integers starting at 1,
 * strictly increasing within a session, never reused (a branch keeps its
 * source's cursors). The runner's cursor is the cursor of the last entry it
 * received; "new since C" is every entry with cursor > C.
 */
export interface BatchEntry {
  cursor: number;
  update: TicketUpdate;
  /**
   * W3C traceparent of the span that applied the update (step-context's
   * `ctxflow.step_context.apply`), when it was traced: the runner links the
   * context pass that delivers the entry to it. Absent on untraced entries.
   */
  traceparent?: string;
}

/**
 * What applying one update did to one session:
 * - `appended`: a new entry (with its cursor);
 * - `duplicate`: the session already has an entry with this update id;
 * - `stale`: the session already has a newer update of the same ticket (by
 *   `version` when both have one, else by `occurredAt`): older news is dropped;
 * - `unsubscribed`: (applyBatch of a store made `subscribedOnly`) the session no
 *   longer has any subscription, e.g. it was erased: nothing is written for it.
 */
export type AppendOutcome =
  | { outcome: 'appended'; cursor: number }
  | { outcome: 'duplicate' }
  | { outcome: 'stale' }
  /** A store that appends only to subscribed sessions (`subscribedOnly`): the session has no subscription (erased). */
  | { outcome: 'unsubscribed' };

/** The bus position of a consumed record; `offset` is a decimal string (Kafka offsets exceed 2^53). */
export interface ConsumedPosition {
  topic: string;
  partition: number;
  offset: string;
}

/** `applied: false`: the position was at or below the stored one (consumed before), nothing was written for it. */
export type ApplyResult = { applied: true; sessions: Record<string, AppendOutcome> } | { applied: false };

/** One consumed record of `applyBatch`. */
export interface BatchRecord {
  position: ConsumedPosition;
  /**
   * The update the record carries; absent for a record with nothing to apply
   * (a poison record), of which only the position is consumed.
   */
  update?: TicketUpdate;
  /** The sessions to append `update` to (each as `append` would); none when absent. */
  sessionIds?: readonly string[];
  /** Stored with each entry appended for this record (see BatchEntry). */
  traceparent?: string;
}

/**
 * Per-session, append-only streams of ticket updates, plus the consumed
 * offsets that make consumption from the bus exactly-once. Adapters:
 * memory-batch-store.ts (embedded default), redis-batch-store.ts; both pass
 * test/contract/batch-store.contract.ts.
 *
 * Staleness is judged per session and ticket against the newest update
 * appended to that session: an update is stale when both it and the newest
 * carry a `version` and its version is lower, or otherwise when its
 * `occurredAt` is earlier. Equal versions or times are not stale (distinct
 * events of one moment); the update id catches repeats.
 */
export interface BatchStore {
  /** Appends `update` to one session's stream: idempotent by `update.id`, stale updates dropped. */
  append(sessionId: string, update: TicketUpdate): Promise<AppendOutcome>;
  /**
   * Entries with cursor > `after`, in cursor order: at most `maxEntries`, and
   * stopping once the entries' stored size (JSON of the update, UTF-8 bytes)
   * passes `maxBytes`; the entry that passes it is included, so a non-empty
   * stream always yields at least one entry.
   */
  readSince(sessionId: string, after: number, limits: { maxEntries: number; maxBytes: number }): Promise<BatchEntry[]>;
  /**
   * A branch: `to` gets `from`'s entries with the same cursors, its dedupe ids
   * and staleness marks. Entries `to` already had that `from` lacks (applied
   * while the branch was being made) are kept, re-stamped after `from`'s last
   * cursor. Safe to repeat.
   */
  copy(fromSessionId: string, toSessionId: string): Promise<void>;
  /**
   * Exactly-once consumption: appends `update` to every session in `sessionIds`
   * (each as `append` would) AND records `position` as consumed, atomically.
   * A position at or below the stored one for its topic and partition is
   * refused whole (`applied: false`), nothing written. `trace.traceparent`,
   * when given, is stored with each appended entry (see BatchEntry).
   */
  applyUpdate(
    update: TicketUpdate,
    sessionIds: readonly string[],
    position: ConsumedPosition,
    trace?: { traceparent?: string },
  ): Promise<ApplyResult>;
  /**
   * Exactly-once consumption of a run of records of ONE topic and partition,
   * in strictly increasing offset order (else it throws before writing):
   * appends every record's update to its sessions, in record order, AND
   * records the offset of the last record as consumed, in one atomic write.
   *
   * Records at or below the stored offset were consumed before: each is
   * skipped (`applied: false`) and nothing is written for it; as offsets
   * increase, that is a prefix of the run. So a redelivery that overlaps what
   * was applied applies exactly the rest, and a consumer that lost its
   * partition has the late writes of everything the new owner already stored
   * refused, record by record, exactly as `applyUpdate` one at a time would.
   * A record without an update is consumed with nothing appended
   * (`applied: true`, no sessions).
   *
   * Resolves to one result per record, in order; an empty run writes nothing.
   * On Redis Cluster the atomic unit is one session (see redis-batch-store.ts);
   * the outcome is the same exactly-once per session.
   */
  applyBatch(records: readonly BatchRecord[]): Promise<ApplyResult[]>;
  /**
   * Erases the session's stream, sequence, applied ids, marks and offsets; nothing
   * when there are none (idempotent). A later apply writes again unless the store
   * appends only to subscribed sessions and the subscriptions were erased first.
   */
  erase(sessionId: string): Promise<void>;
  /** Refreshes the retention of the session's keys (a step read its stream); nothing without retention. */
  touch(sessionId: string): Promise<void>;
  /** Records a consumed position that carried nothing to apply (a poison record); never moves backwards. */
  recordOffset(position: ConsumedPosition): Promise<void>;
  /** The next offset to read for a partition (the stored one plus 1), or undefined when none is stored. */
  resumeFrom(topic: string, partition: number): Promise<string | undefined>;
  close?(): Promise<void>;
}

/** Staleness mark of one ticket in one session: the newest appended version and time. */
export interface TicketMark {
  version?: number;
  /** Epoch ms of `occurredAt`; undefined when it does not parse. */
  occurredAtMs?: number;
}

/** The rule above, shared by the adapters (the Redis script restates it in Lua). */
export function isStale(mark: TicketMark | undefined, update: Pick<TicketUpdate, 'version' | 'occurredAt'>): boolean {
  if (!mark) return false;
  if (mark.version !== undefined && update.version !== undefined) return update.version < mark.version;
  const at = occurredAtMs(update.occurredAt);
  return at !== undefined && mark.occurredAtMs !== undefined && at < mark.occurredAtMs;
}

/** The mark after appending `update`. */
export function nextMark(
  mark: TicketMark | undefined,
  update: Pick<TicketUpdate, 'version' | 'occurredAt'>,
): TicketMark {
  const at = occurredAtMs(update.occurredAt);
  const version = update.version ?? mark?.version;
  const times = [mark?.occurredAtMs, at].filter((t): t is number => t !== undefined);
  const next: TicketMark = {};
  if (version !== undefined) next.version = version;
  if (times.length > 0) next.occurredAtMs = Math.max(...times);
  return next;
}

export function occurredAtMs(occurredAt: string): number | undefined {
  const ms = Date.parse(occurredAt);
  return Number.isFinite(ms) ? ms : undefined;
}

/** Offsets as canonical decimal strings; compares without losing precision. */
export function compareOffsets(a: string, b: string): number {
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * The canonical offsets of a run for `applyBatch`: one topic and partition,
 * strictly increasing; throws otherwise.
 */
export function checkRun(records: readonly BatchRecord[]): string[] {
  const offsets = records.map((r) => canonicalOffset(r.position.offset));
  const first = records[0]?.position;
  for (let i = 1; i < records.length; i++) {
    const { topic, partition } = records[i]!.position;
    if (topic !== first!.topic || partition !== first!.partition) {
      throw new Error(`a batch spans ${first!.topic}:${first!.partition} and ${topic}:${partition}`);
    }
    if (compareOffsets(offsets[i]!, offsets[i - 1]!) <= 0) {
      throw new Error(`batch offsets do not increase: ${offsets[i - 1]} then ${offsets[i]}`);
    }
  }
  return offsets;
}

export function canonicalOffset(offset: string): string {
  if (!/^\d+$/.test(offset)) throw new Error(`offset ${JSON.stringify(offset)} is not a decimal integer`);
  return BigInt(offset).toString();
}

/** `applyUpdate` as every adapter implements it: a run of one record. */
export async function applyOne(
  store: Pick<BatchStore, 'applyBatch'>,
  update: TicketUpdate,
  sessionIds: readonly string[],
  position: ConsumedPosition,
  trace: { traceparent?: string },
): Promise<ApplyResult> {
  const record: BatchRecord = { position, update, sessionIds };
  if (trace.traceparent) record.traceparent = trace.traceparent;
  return (await store.applyBatch([record]))[0]!;
}
