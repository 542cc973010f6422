import { byteLength, type TicketUpdate, ticketKey } from '@ctxflow/contracts';
import {
  type AppendOutcome,
  type ApplyResult,
  applyOne,
  type BatchEntry,
  type BatchRecord,
  type BatchStore,
  type ConsumedPosition,
  canonicalOffset,
  checkRun,
  compareOffsets,
  isStale,
  nextMark,
  type TicketMark,
} from '../ports/batch-store.ts';

interface SessionStream {
  entries: BatchEntry[];
  /** The last cursor handed out (0 before the first). */
  seq: number;
  /** Update ids already applied. */
  ids: Set<string>;
  /** ticketKey -> newest appended version and time. */
  marks: Map<string, TicketMark>;
  /** Clock time of the last write or touch (retention). */
  touched: number;
}

export interface MemoryBatchStoreOptions {
  /** Retention in ms (CTXFLOW_SESSION_TTL_MS): a stream no write touched for this long is gone. 0 (default): kept. */
  ttlMs?: number;
  /** Milliseconds since the epoch (default Date.now). */
  clock?: { now(): number };
  /**
   * When given, applyBatch appends only to sessions for which it answers true (the
   * subscription store's `holds`, which refreshes the subscriptions' retention as the
   * Redis script does); others get `unsubscribed`, nothing written. `touch` calls it too.
   */
  subscribed?: (sessionId: string) => boolean;
}

/** Sweeps for idle streams at most this often (ms), and at least once per retention. */
const SWEEP_EVERY_MS = 60_000;

/**
 * Batch streams in process memory: the embedded default. Every method runs
 * without awaiting between its reads and writes, so each is atomic in the one
 * process, as the Redis scripts are. Nothing survives a restart.
 */
export class MemoryBatchStore implements BatchStore {
  readonly #streams = new Map<string, SessionStream>();
  /** `${topic}\u0000${partition}` -> last consumed offset. */
  readonly #offsets = new Map<string, string>();
  readonly #ttlMs: number;
  readonly #clock: { now(): number };
  readonly #subscribed: ((sessionId: string) => boolean) | undefined;
  #sweptAt: number;

  constructor(options: MemoryBatchStoreOptions = {}) {
    this.#ttlMs = options.ttlMs ?? 0;
    this.#clock = options.clock ?? { now: () => Date.now() };
    this.#subscribed = options.subscribed;
    this.#sweptAt = this.#clock.now();
  }

  /** The session's stream unless gone: idle streams are dropped lazily and by a sweep (as MemorySessionStore). */
  #live(sessionId: string): SessionStream | undefined {
    if (this.#ttlMs === 0) return this.#streams.get(sessionId);
    const now = this.#clock.now();
    if (now - this.#sweptAt >= Math.min(SWEEP_EVERY_MS, this.#ttlMs)) {
      this.#sweptAt = now;
      for (const [id, stream] of this.#streams) if (now - stream.touched >= this.#ttlMs) this.#streams.delete(id);
    }
    const stream = this.#streams.get(sessionId);
    if (stream && now - stream.touched >= this.#ttlMs) {
      this.#streams.delete(sessionId);
      return undefined;
    }
    return stream;
  }

  async erase(sessionId: string): Promise<void> {
    this.#streams.delete(sessionId);
  }

  async touch(sessionId: string): Promise<void> {
    const stream = this.#live(sessionId);
    if (stream) stream.touched = this.#clock.now();
    this.#subscribed?.(sessionId);
  }

  async append(sessionId: string, update: TicketUpdate): Promise<AppendOutcome> {
    return this.#append(this.#stream(sessionId), structuredClone(update));
  }

  async readSince(
    sessionId: string,
    after: number,
    limits: { maxEntries: number; maxBytes: number },
  ): Promise<BatchEntry[]> {
    const stream = this.#live(sessionId);
    if (!stream) return [];
    const out: BatchEntry[] = [];
    let bytes = 0;
    // Cursors increase along the array: find the first entry after `after` by bisection.
    let low = 0;
    let high = stream.entries.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (stream.entries[mid]!.cursor <= after) low = mid + 1;
      else high = mid;
    }
    for (const entry of stream.entries.slice(low)) {
      if (out.length >= limits.maxEntries || bytes > limits.maxBytes) break;
      out.push(structuredClone(entry));
      bytes += byteLength(entry.update);
    }
    return out;
  }

  async copy(fromSessionId: string, toSessionId: string): Promise<void> {
    const from = this.#live(fromSessionId);
    const existing = this.#live(toSessionId);
    const target: SessionStream = from
      ? {
          entries: structuredClone(from.entries),
          seq: from.seq,
          ids: new Set(from.ids),
          marks: new Map([...from.marks].map(([k, v]) => [k, { ...v }])),
          touched: this.#clock.now(),
        }
      : { entries: [], seq: 0, ids: new Set(), marks: new Map(), touched: this.#clock.now() };
    for (const entry of existing?.entries ?? []) this.#append(target, entry.update, entry.traceparent);
    this.#streams.set(toSessionId, target);
  }

  async applyUpdate(
    update: TicketUpdate,
    sessionIds: readonly string[],
    position: ConsumedPosition,
    trace: { traceparent?: string } = {},
  ): Promise<ApplyResult> {
    return applyOne(this, update, sessionIds, position, trace);
  }

  async applyBatch(records: readonly BatchRecord[]): Promise<ApplyResult[]> {
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
      const sessions: Record<string, AppendOutcome> = {};
      if (record.update) {
        for (const sessionId of record.sessionIds ?? []) {
          if (this.#subscribed && !this.#subscribed(sessionId)) {
            sessions[sessionId] = { outcome: 'unsubscribed' };
            continue;
          }
          sessions[sessionId] = this.#append(
            this.#stream(sessionId),
            structuredClone(record.update),
            record.traceparent,
          );
        }
      }
      results.push({ applied: true, sessions });
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

  /** The session's stream for a write (made when absent), its retention refreshed. */
  #stream(sessionId: string): SessionStream {
    let stream = this.#live(sessionId);
    if (!stream) {
      stream = { entries: [], seq: 0, ids: new Set(), marks: new Map(), touched: 0 };
      this.#streams.set(sessionId, stream);
    }
    stream.touched = this.#clock.now();
    return stream;
  }

  #append(stream: SessionStream, update: TicketUpdate, traceparent?: string): AppendOutcome {
    if (stream.ids.has(update.id)) return { outcome: 'duplicate' };
    const key = ticketKey(update);
    const mark = stream.marks.get(key);
    if (isStale(mark, update)) return { outcome: 'stale' };
    stream.seq += 1;
    stream.entries.push({ cursor: stream.seq, update, ...(traceparent ? { traceparent } : {}) });
    stream.ids.add(update.id);
    stream.marks.set(key, nextMark(mark, update));
    return { outcome: 'appended', cursor: stream.seq };
  }
}
