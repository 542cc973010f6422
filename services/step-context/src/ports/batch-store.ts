import { byteLength, type FeedSource, type TicketUpdate } from '@ctxflow/contracts';
import type { FeedFollow } from '@ctxflow/subscriptions';

/*
 * Feed streams. Every update is stored once per stream it belongs to, and only
 * while that stream has a live subscriber: the stream of its ticket
 * (`{ source, ticket }`), the stream of its scope (`{ source, ticket: '*', scope }`)
 * when it has one, and the stream of its whole source (`{ source, ticket: '*' }`).
 * A stream is named by the subscription it serves, within a tenant.
 *
 * All streams of one tenant's source share a sequence: an update stored in
 * several of them gets the same sequence number `seq` in each. A reader's
 * position in a source is one integer (the last `seq` it read): "new since" is
 * every entry with a greater seq in any stream it follows, each seq once. So a
 * session following a ticket and a wildcard covering it gets each update once,
 * and an update costs the same whatever the number of sessions following it.
 */

/** One entry of a feed stream: an update as stored, with its place in its source's sequence. */
export interface BatchEntry {
  /** The update's source (its sequence: see above). */
  source: FeedSource;
  /** Position in the source's sequence (1, 2, ...; shared by every stream of the source). */
  seq: number;
  update: TicketUpdate;
  /**
   * W3C traceparent of the span that applied the update (step-context's
   * `ctxflow.step_context.apply`), when it was traced: the runner links the
   * context pass that delivers the entry to it. Absent on untraced entries.
   */
  traceparent?: string;
}

/** A reader's position: per source, the last seq read (absent: none yet). */
export type FeedPosition = Readonly<Record<FeedSource, number>>;

/**
 * What applying one update did:
 * - `appended`: stored with `seq` in `streams` streams (those with a live subscriber);
 * - `duplicate`: its source already stored an update with this id (see BatchStore);
 * - `stale`: its source already stored a newer update of the same ticket (by
 *   `version` when both have one, else by `occurredAt`): older news is dropped;
 * - `unwatched`: none of its streams has a live subscriber: nothing is stored.
 */
export type AppendOutcome =
  | { outcome: 'appended'; seq: number; streams: number }
  | { outcome: 'duplicate' }
  | { outcome: 'stale' }
  | { outcome: 'unwatched' };

/** The bus position of a consumed record; `offset` is a decimal string (Kafka offsets exceed 2^53). */
export interface ConsumedPosition {
  topic: string;
  partition: number;
  offset: string;
}

/**
 * What is stored of a partition's consumption: the last consumed offset, and
 * the id of the topic (the log) it was read from, as bound when the partition
 * was assigned (domain/offset-check.ts). Either may be absent.
 */
export interface StoredPartition {
  /** The last consumed offset, canonical decimal string. */
  offset?: string;
  /** The topic id `offset` belongs to. */
  topicId?: string;
}

/**
 * `applied: false`: the position was at or below the stored one (consumed before), nothing was written for it.
 * `outcome`: what the record's update did; absent for a record without one.
 */
export type ApplyResult = { applied: true; outcome?: AppendOutcome } | { applied: false };

/** One consumed record of `applyBatch`. */
export interface BatchRecord {
  position: ConsumedPosition;
  /**
   * The update the record carries; absent for a record with nothing to apply
   * (a poison record), of which only the position is consumed.
   */
  update?: TicketUpdate;
  /** Stored with the update's entries (see BatchEntry). */
  traceparent?: string;
}

/**
 * Feed streams of ticket updates (above), plus the consumed offsets that make
 * consumption from the bus exactly-once. Adapters: memory-batch-store.ts
 * (embedded default), redis-batch-store.ts; both pass
 * test/contract/batch-store.contract.ts.
 *
 * Whether a stream has a live subscriber is the subscription store's record
 * (a session subscribed and not expired); the batch store reads it in the same
 * atomic step as it writes.
 *
 * Dedupe and staleness are judged per tenant's source, among the updates it
 * stored: an update whose id was stored among its source's last
 * `DEDUPE_WINDOW` stored updates is a duplicate; an update is stale when both
 * it and the newest stored update of its ticket carry a `version` and its
 * version is lower, or otherwise when its `occurredAt` is earlier. Equal
 * versions or times are not stale (distinct events of one moment).
 */
export interface BatchStore {
  /**
   * Stores `update` in every stream it belongs to, whether or not followed
   * (a direct write, without offset): idempotent by id, stale updates dropped.
   */
  append(update: TicketUpdate): Promise<AppendOutcome>;
  /**
   * The entries of the streams `follows` names with, per stream, seq > max(its
   * `start`, `after[source]`), each seq of a source once, in order: by seq within
   * a source, sources interleaved in the order they were stored. At most `maxEntries`, and stopping
   * once the entries' stored size (JSON of the update, UTF-8 bytes) passes
   * `maxBytes`; the entry that passes it is included, so when anything is new at
   * least one entry comes. Every source's entries are a prefix of what is new in
   * it: a reader's next position in a source is the seq of its last entry here.
   */
  readSince(
    follows: readonly FeedFollow[],
    after: FeedPosition,
    limits: { maxEntries: number; maxBytes: number },
  ): Promise<BatchEntry[]>;
  /** The last seq of `tenant`'s `source` (0 before the first): where a new subscription starts. */
  positionOf(tenant: string, source: FeedSource): Promise<number>;
  /**
   * Exactly-once consumption: applies `update` AND records `position` as
   * consumed, atomically. A position at or below the stored one for its topic
   * and partition is refused whole (`applied: false`), nothing written.
   */
  applyUpdate(update: TicketUpdate, position: ConsumedPosition, trace?: { traceparent?: string }): Promise<ApplyResult>;
  /**
   * Exactly-once consumption of a run of records of ONE topic and partition,
   * in strictly increasing offset order (else it throws before writing):
   * applies every record's update, in record order, AND records the offset of
   * the last record as consumed, in one atomic write.
   *
   * Records at or below the stored offset were consumed before: each is
   * skipped (`applied: false`) and nothing is written for it; as offsets
   * increase, that is a prefix of the run. So a redelivery that overlaps what
   * was applied applies exactly the rest, and a consumer that lost its
   * partition has the late writes of everything the new owner already stored
   * refused, record by record, exactly as `applyUpdate` one at a time would.
   * A record without an update is consumed with nothing stored
   * (`applied: true`, no outcome).
   *
   * Resolves to one result per record, in order; an empty run writes nothing.
   * On Redis Cluster the atomic unit is one tenant's source (see
   * redis-batch-store.ts); the outcome is the same exactly-once per stream.
   */
  applyBatch(records: readonly BatchRecord[]): Promise<ApplyResult[]>;
  /** Records a consumed position that carried nothing to apply (a poison record); never moves backwards. */
  recordOffset(position: ConsumedPosition): Promise<void>;
  /** The next offset to read for a partition (the stored one plus 1), or undefined when none is stored. */
  resumeFrom(topic: string, partition: number): Promise<string | undefined>;
  /** What is stored of a partition's consumption (`{}` when nothing is). */
  storedPartition(topic: string, partition: number): Promise<StoredPartition>;
  /**
   * Replaces what is stored of a partition with `next` (an absent field: none
   * stored), atomically, if it is still `expected`; resolves false and writes
   * nothing when it is not (another write came in between). With an `offset`
   * other than `expected`'s it is a reset: whatever was consumed of the
   * partition before is forgotten, and the next write applies any record above
   * `next.offset` (any record, when absent) as never consumed (on Redis Cluster
   * the sources' own offsets of the partition too).
   */
  rebindPartition(topic: string, partition: number, expected: StoredPartition, next: StoredPartition): Promise<boolean>;
  close?(): Promise<void>;
}

/** How many of a source's last stored update ids dedupe a repeat (see BatchStore). */
export const DEDUPE_WINDOW = 10_000;

/** Staleness mark of one ticket in its source: the newest stored version and time. */
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

/** A StoredPartition of the fields that are there (null and undefined: absent). */
export function storedPartitionOf(offset?: string | null, topicId?: string | null): StoredPartition {
  const stored: StoredPartition = {};
  if (offset !== undefined && offset !== null) stored.offset = offset;
  if (topicId !== undefined && topicId !== null) stored.topicId = topicId;
  return stored;
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
  position: ConsumedPosition,
  trace: { traceparent?: string },
): Promise<ApplyResult> {
  const record: BatchRecord = { position, update };
  if (trace.traceparent) record.traceparent = trace.traceparent;
  return (await store.applyBatch([record]))[0]!;
}

/** An entry as an adapter read it, with its write order across sources (arrival order; ties: either). */
export interface StoredEntry {
  entry: BatchEntry;
  order: number;
}

/**
 * One source's entries from the reads of its streams (each in seq order):
 * merged by seq, each seq once, and cut after the smallest last seq of a read
 * that may have stopped early (`full`: it returned as many entries as it
 * asked), so the result is a prefix of everything new in the source.
 */
export function mergeStreams(reads: readonly { entries: readonly StoredEntry[]; full: boolean }[]): StoredEntry[] {
  let cut = Number.POSITIVE_INFINITY;
  for (const read of reads) {
    const last = read.entries[read.entries.length - 1];
    if (read.full && last) cut = Math.min(cut, last.entry.seq);
  }
  const bySeq = new Map<number, StoredEntry>();
  for (const read of reads) {
    for (const e of read.entries) if (e.entry.seq <= cut && !bySeq.has(e.entry.seq)) bySeq.set(e.entry.seq, e);
  }
  return [...bySeq.values()].sort((a, b) => a.entry.seq - b.entry.seq);
}

/**
 * Sources' entries (each as mergeStreams made them) in one list within the
 * limits of `readSince`: by seq within a source, sources interleaved by write
 * order (ties: the order of `sources`).
 */
export function mergeSources(
  sources: readonly (readonly StoredEntry[])[],
  limits: { maxEntries: number; maxBytes: number },
): BatchEntry[] {
  const heads = sources.map(() => 0);
  const out: BatchEntry[] = [];
  let bytes = 0;
  while (out.length < limits.maxEntries && bytes <= limits.maxBytes) {
    let best = -1;
    for (let i = 0; i < sources.length; i++) {
      const head = sources[i]![heads[i]!];
      if (!head) continue;
      if (best < 0 || head.order < sources[best]![heads[best]!]!.order) best = i;
    }
    if (best < 0) break;
    const { entry } = sources[best]![heads[best]!]!;
    heads[best] = heads[best]! + 1;
    out.push(entry);
    bytes += byteLength(entry.update);
  }
  return out;
}

/** Where a follow reads from: after its start and after the reader's position in its source. */
export function readFrom(follow: FeedFollow, after: FeedPosition): number {
  return Math.max(follow.start, after[follow.subscription.source] ?? 0);
}
