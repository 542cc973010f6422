import { type FeedSource, type TicketUpdate, ticketKey, updateTenant } from '@ctxflow/contracts';
import {
  candidateSubscriptions,
  type FeedFollow,
  type MemorySubscriptionStore,
  type Subscription,
  subscriptionId,
} from '@ctxflow/subscriptions';
import {
  type AppendOutcome,
  type ApplyResult,
  type ConsumedPosition,
  type ConsumedRecord,
  DEDUPE_WINDOW,
  type FeedEntry,
  type FeedPosition,
  type FeedStreams,
  type StoredPartition,
} from '../ports/feed-streams.ts';
import { applyOne, canonicalOffset, checkRun, compareOffsets, storedPartitionOf } from './consumed-offsets.ts';
import { mergeSources, mergeStreams, readFrom, type StoredEntry } from './feed-stream-merge.ts';
import { isStale, nextMark, type TicketMark } from './ticket-marks.ts';

/** One tenant's source: its sequence, streams, dedupe ids and staleness marks. */
interface SourceState {
  /** The last seq handed out (0 before the first); never dropped, so positions stay valid. */
  seq: number;
  /** subscriptionId -> the stream's entries, in seq order. */
  streams: Map<string, StoredEntry[]>;
  /** Update id -> seq, the last DEDUPE_WINDOW stored (in insertion order). */
  ids: Map<string, number>;
  /** ticketKey -> newest stored version and time. */
  marks: Map<string, TicketMark>;
  /** Clock time of the last write (retention of streams, ids and marks). */
  touched: number;
}

export interface MemoryFeedStreamsOptions {
  /** Retention in ms (CTXFLOW_SESSION_TTL_MS): a source's streams no write touched for this long are gone. 0 (default): kept. */
  ttlMs?: number;
  /** Milliseconds since the epoch (default Date.now). */
  clock?: { now(): number };
  /**
   * The subscription store whose followers decide which streams are written
   * (`watched`); it gets its start positions from this store. Absent: every
   * stream of an update is written, and subscriptions start at 0 (tests).
   */
  subscriptions?: MemorySubscriptionStore;
}

/**
 * Feed streams in process memory: the embedded default (see
 * ports/feed-streams.ts for the model). Every method runs without awaiting
 * between its reads and writes, so each is atomic in the one process, as the
 * Redis scripts are. Nothing survives a restart.
 */
export class MemoryFeedStreams implements FeedStreams {
  /** `${tenant}\u0000${source}` -> its state. */
  readonly #sources = new Map<string, SourceState>();
  /** `${topic}\u0000${partition}` -> last consumed offset. */
  readonly #offsets = new Map<string, string>();
  /** `${topic}\u0000${partition}` -> the topic id its offset belongs to. */
  readonly #topicIds = new Map<string, string>();
  readonly #ttlMs: number;
  readonly #clock: { now(): number };
  readonly #subscriptions: MemorySubscriptionStore | undefined;
  /** Write order across sources. */
  #order = 0;

  constructor(options: MemoryFeedStreamsOptions = {}) {
    this.#ttlMs = options.ttlMs ?? 0;
    this.#clock = options.clock ?? { now: () => Date.now() };
    this.#subscriptions = options.subscriptions;
    this.#subscriptions?.usePositions({ positionNow: (tenant, source) => this.#source(tenant, source, false).seq });
  }

  /** A source's state; idle past the retention, its streams, ids and marks are dropped (its seq stays). */
  #source(tenant: string, source: FeedSource, write: boolean): SourceState {
    const key = `${tenant}\u0000${source}`;
    let state = this.#sources.get(key);
    if (!state) {
      state = { seq: 0, streams: new Map(), ids: new Map(), marks: new Map(), touched: this.#clock.now() };
      this.#sources.set(key, state);
    }
    const now = this.#clock.now();
    if (this.#ttlMs > 0 && now - state.touched >= this.#ttlMs) {
      state.streams.clear();
      state.ids.clear();
      state.marks.clear();
    }
    if (write) state.touched = now;
    return state;
  }

  async positionOf(tenant: string, source: FeedSource): Promise<number> {
    return this.#source(tenant, source, false).seq;
  }

  async append(update: TicketUpdate): Promise<AppendOutcome> {
    return this.#store(structuredClone(update), undefined, true);
  }

  async readSince(
    follows: readonly FeedFollow[],
    after: FeedPosition,
    limits: { maxEntries: number; maxBytes: number },
  ): Promise<FeedEntry[]> {
    const bySource = new Map<string, StoredEntry[][]>();
    for (const follow of follows) {
      const state = this.#source(follow.tenant, follow.subscription.source, false);
      const entries = state.streams.get(subscriptionId(follow.subscription)) ?? [];
      const from = readFrom(follow, after);
      // Seqs increase along the stream: the first entry after `from` by bisection.
      let low = 0;
      let high = entries.length;
      while (low < high) {
        const mid = (low + high) >>> 1;
        if (entries[mid]!.entry.seq <= from) low = mid + 1;
        else high = mid;
      }
      const key = `${follow.tenant}\u0000${follow.subscription.source}`;
      const reads = bySource.get(key) ?? [];
      reads.push(entries.slice(low, low + limits.maxEntries));
      bySource.set(key, reads);
    }
    const sources = [...bySource.values()].map((reads) =>
      mergeStreams(reads.map((entries) => ({ entries, full: entries.length === limits.maxEntries }))),
    );
    return mergeSources(sources, limits).map((e) => structuredClone(e));
  }

  async applyUpdate(
    update: TicketUpdate,
    position: ConsumedPosition,
    trace: { traceparent?: string } = {},
  ): Promise<ApplyResult> {
    return applyOne(this, update, position, trace);
  }

  async applyRun(records: readonly ConsumedRecord[]): Promise<ApplyResult[]> {
    const offsets = checkRun(records);
    if (records.length === 0) return [];
    const { topic, partition } = records[0]!.position;
    const offsetKey = `${topic}\u0000${partition}`;
    const stored = this.#offsets.get(offsetKey);
    const results: ApplyResult[] = [];
    let last: string | undefined;
    records.forEach((record, i) => {
      const offset = offsets[i]!;
      if (stored !== undefined && compareOffsets(offset, stored) <= 0) {
        results.push({ applied: false });
        return;
      }
      last = offset;
      if (!record.update) {
        results.push({ applied: true });
        return;
      }
      results.push({ applied: true, outcome: this.#store(structuredClone(record.update), record.traceparent, false) });
    });
    if (last !== undefined) this.#offsets.set(offsetKey, last);
    return results;
  }

  async recordOffset(position: ConsumedPosition): Promise<void> {
    const offsetKey = `${position.topic}\u0000${position.partition}`;
    const offset = canonicalOffset(position.offset);
    const stored = this.#offsets.get(offsetKey);
    if (stored === undefined || compareOffsets(offset, stored) > 0) this.#offsets.set(offsetKey, offset);
  }

  async resumeFrom(topic: string, partition: number): Promise<string | undefined> {
    const stored = this.#offsets.get(`${topic}\u0000${partition}`);
    return stored === undefined ? undefined : (BigInt(stored) + 1n).toString();
  }

  async storedPartition(topic: string, partition: number): Promise<StoredPartition> {
    const key = `${topic}\u0000${partition}`;
    return storedPartitionOf(this.#offsets.get(key), this.#topicIds.get(key));
  }

  async rebindPartition(
    topic: string,
    partition: number,
    expected: StoredPartition,
    next: StoredPartition,
  ): Promise<boolean> {
    const key = `${topic}\u0000${partition}`;
    if (this.#offsets.get(key) !== expected.offset || this.#topicIds.get(key) !== expected.topicId) return false;
    setOrDelete(this.#offsets, key, next.offset === undefined ? undefined : canonicalOffset(next.offset));
    setOrDelete(this.#topicIds, key, next.topicId);
    return true;
  }

  /** Stores `update` once in each of its streams that is watched (or every one, `all`). */
  #store(update: TicketUpdate, traceparent: string | undefined, all: boolean): AppendOutcome {
    const tenant = updateTenant(update);
    const streams: Subscription[] = candidateSubscriptions(update).filter(
      (s) => all || !this.#subscriptions || this.#subscriptions.watched(tenant, s),
    );
    if (streams.length === 0) return { outcome: 'unwatched' };
    const state = this.#source(tenant, update.source, false);
    if (state.ids.has(update.id)) return { outcome: 'duplicate' };
    const key = ticketKey(update);
    const mark = state.marks.get(key);
    if (isStale(mark, update)) return { outcome: 'stale' };
    this.#source(tenant, update.source, true);
    state.seq += 1;
    const entry: StoredEntry = {
      entry: { source: update.source, seq: state.seq, update, ...(traceparent ? { traceparent } : {}) },
      order: ++this.#order,
    };
    for (const s of streams) {
      const id = subscriptionId(s);
      const list = state.streams.get(id);
      if (list) list.push(entry);
      else state.streams.set(id, [entry]);
    }
    state.ids.set(update.id, state.seq);
    if (state.ids.size > DEDUPE_WINDOW) state.ids.delete(state.ids.keys().next().value!);
    state.marks.set(key, nextMark(mark, update));
    return { outcome: 'appended', seq: state.seq, streams: streams.length };
  }
}

function setOrDelete(map: Map<string, string>, key: string, value: string | undefined): void {
  if (value === undefined) map.delete(key);
  else map.set(key, value);
}
