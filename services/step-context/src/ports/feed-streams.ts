import type { FeedSource, TicketUpdate } from '@ctxflow/contracts';
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
export interface FeedEntry {
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
 * - `duplicate`: its source already stored an update with this id (see FeedStreams);
 * - `stale`: its source already stored a newer update of the same ticket (see
 *   FeedStreams): older news is dropped;
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

/** One consumed record of `applyRun`. */
export interface ConsumedRecord {
  position: ConsumedPosition;
  /**
   * The update the record carries; absent for a record with nothing to apply
   * (a poison record), of which only the position is consumed.
   */
  update?: TicketUpdate;
  /** Stored with the update's entries (see FeedEntry). */
  traceparent?: string;
}

/**
 * Feed streams of ticket updates (above), plus the consumed offsets that make
 * consumption from the bus exactly-once. Adapters: memory-feed-streams.ts
 * (embedded default), redis-feed-streams.ts; both pass
 * test/contract/feed-streams.contract.ts.
 *
 * Whether a stream has a live subscriber is the subscription store's record
 * (a session subscribed and not expired); the feed stream store reads it in the same
 * atomic step as it writes.
 *
 * Dedupe and staleness are judged per tenant's source, among the updates it
 * stored: an update whose id was stored among its source's last
 * `DEDUPE_WINDOW` stored updates is a duplicate; an update is stale when both
 * it and the newest stored update of its ticket carry a `version` and its
 * version is lower, or otherwise when its `occurredAt` is earlier. Equal
 * versions or times are not stale (distinct events of one moment). Both
 * adapters apply this rule through adapters/ticket-marks.ts (the Redis script
 * mirrors it, tested to agree).
 */
export interface FeedStreams {
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
  ): Promise<FeedEntry[]>;
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
   * redis-feed-streams.ts); the outcome is the same exactly-once per stream.
   */
  applyRun(records: readonly ConsumedRecord[]): Promise<ApplyResult[]>;
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

/** How many of a source's last stored update ids dedupe a repeat (see FeedStreams). */
export const DEDUPE_WINDOW = 10_000;
