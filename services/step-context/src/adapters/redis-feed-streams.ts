import { CtxflowError, type FeedSource, type TicketUpdate, ticketKey, updateTenant } from '@ctxflow/contracts';
import { candidateSubscriptions, type FeedFollow, subscriptionId } from '@ctxflow/subscriptions';
import type { Cluster, Redis } from 'ioredis';
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
import { applyOne, canonicalOffset, checkRun, storedPartitionOf } from './consumed-offsets.ts';
import { mergeSources, mergeStreams, readFrom, type StoredEntry } from './feed-stream-merge.ts';
import { type ApplyUpdatesArgs, type ApplyUpdatesRecord, FeedScripts } from './redis/feed-scripts.ts';
import {
  offsetEpochField,
  offsetField,
  offsetTopicIdField,
  type StepContextKeys,
  sourceOffsetField,
  stepContextKeys,
} from './redis/keys.ts';
import { occurredAtMs } from './ticket-marks.ts';

/** Codes of apply-updates.lua (see its header). */
const SKIPPED = -1;
const APPLIED = 1;
const DUPLICATE = 0;
const STALE = -2;
const UNWATCHED = -3;

/** Most entries read from one stream by one readSince. */
const READ_PAGE = 100;

function outcomeOf(code: number, streams: number): AppendOutcome {
  if (code > 0) return { outcome: 'appended', seq: code, streams };
  if (code === DUPLICATE) return { outcome: 'duplicate' };
  if (code === STALE) return { outcome: 'stale' };
  if (code === UNWATCHED) return { outcome: 'unwatched' };
  throw new Error(`apply-updates.lua returned an unknown code ${code}`);
}

/** The keys of apply-updates.lua for a run, and each record's layout into them. */
class KeyLayout {
  readonly keys: string[];
  readonly #index = new Map<string, number>();
  readonly #keys: StepContextKeys;

  constructor(keys: StepContextKeys, offsets: string) {
    this.#keys = keys;
    this.keys = [offsets];
  }

  #at(first: string, ...rest: string[]): number {
    let i = this.#index.get(first);
    if (i === undefined) {
      i = this.keys.length + 1; // 1-based, as KEYS
      this.#index.set(first, i);
      this.keys.push(first, ...rest);
    }
    return i;
  }

  /** The layout of apply-updates.lua for `update`: its source, then every stream it belongs to. */
  layout(update: TicketUpdate): number[] {
    const tenant = updateTenant(update);
    const s = this.#keys.source(tenant, update.source);
    const indexes = [this.#at(s.seq, s.ids, s.marks, s.last)];
    for (const c of candidateSubscriptions(update)) {
      const id = subscriptionId(c);
      indexes.push(this.#at(s.stream(id), s.followers(id)));
    }
    return indexes;
  }
}

/**
 * Feed streams on Redis (the model: ports/feed-streams.ts). Every key of one
 * tenant's source (sequence, streams, followers, dedupe ids, marks) sits under
 * that source's hash tag, so each atomic write is one Lua script on one slot
 * (adapters/redis/*.lua).
 *
 * Fan-out: one update costs one script call that checks each of its (at most
 * three) streams for a live follower (ZCOUNT of the followers' expiries from
 * now: O(log n)) and XADDs it once to each watched stream, whatever the number
 * of followers. Nothing is written per session; a session's own key holds its
 * subscriptions with their start positions (@ctxflow/subscriptions' RedisSubscriptionStore), and a
 * step reads its streams since its position (one read script per source: a
 * consistent cut of its streams).
 *
 * Redis Cluster: on a single Redis, `applyRun` is ONE script over every
 * source of the run plus the global offsets hash. On Redis Cluster (detected
 * from the client, or `cluster: true`) no script may span slots, so it runs one
 * script per source with that source's share of the run, all sent at once,
 * each checked against that source's own stored offset (and idempotent by
 * update id), then records the global offset last (never backwards). A crash
 * between them redelivers the run from the old global offset; the sources
 * already written skip what they stored, the others get it: still exactly once
 * per stream.
 *
 * Lifetimes: a source's sequence never expires (positions refer to it; one
 * small key per tenant's source). With `ttlMs`, each stream written, the
 * source's dedupe ids and marks get that TTL at each write: a stream nobody's
 * updates reach for that long is gone. Dedupe ids keep the source's last
 * DEDUPE_WINDOW.
 *
 * A Redis failure surfaces as a retryable `store_unavailable` refusal.
 */
export class RedisFeedStreams implements FeedStreams {
  readonly #redis: Redis | Cluster;
  readonly #scripts: FeedScripts;
  readonly #keys: StepContextKeys;
  readonly #cluster: boolean;
  readonly #ownsClient: boolean;
  readonly #ttlMs: number;
  readonly #clock: { now(): number };

  /**
   * `ownsClient`: close() also quits the client (default false: the caller shares it).
   * `ttlMs`: retention of the streams, ids and marks after each write (CTXFLOW_SESSION_TTL_MS; default 0, kept).
   * `clock`: epoch ms against which followers' expiries are judged (default Date.now).
   */
  constructor(options: {
    redis: Redis | Cluster;
    prefix?: string;
    cluster?: boolean;
    ownsClient?: boolean;
    ttlMs?: number;
    clock?: { now(): number };
  }) {
    this.#redis = options.redis;
    this.#scripts = new FeedScripts(options.redis);
    this.#keys = stepContextKeys(options.prefix ?? 'ctxflow');
    this.#cluster = options.cluster ?? (options.redis as { isCluster?: boolean }).isCluster === true;
    this.#ownsClient = options.ownsClient ?? false;
    this.#ttlMs = options.ttlMs ?? 0;
    this.#clock = options.clock ?? { now: () => Date.now() };
  }

  async positionOf(tenant: string, source: FeedSource): Promise<number> {
    const seq = await this.#guard(() => this.#redis.get(this.#keys.source(tenant, source).seq));
    return seq === null ? 0 : Number(seq);
  }

  async append(update: TicketUpdate): Promise<AppendOutcome> {
    const layout = new KeyLayout(this.#keys, this.#keys.source(updateTenant(update), update.source).offsets);
    const record = recordOf(undefined, update, undefined, layout.layout(update));
    const codes = await this.#guard(() =>
      this.#scripts.applyUpdates(layout.keys, this.#args(undefined, false, true, [record])),
    );
    // [1, code, streams]: a plain append is never skipped.
    return outcomeOf(codeAt(codes, 1), codeAt(codes, 2));
  }

  async readSince(
    follows: readonly FeedFollow[],
    after: FeedPosition,
    limits: { maxEntries: number; maxBytes: number },
  ): Promise<FeedEntry[]> {
    const bySource = new Map<string, { tenant: string; source: string; follows: FeedFollow[] }>();
    for (const follow of follows) {
      const key = `${follow.tenant}\u0000${follow.subscription.source}`;
      const group = bySource.get(key) ?? { tenant: follow.tenant, source: follow.subscription.source, follows: [] };
      group.follows.push(follow);
      bySource.set(key, group);
    }
    const count = Math.max(1, Math.min(READ_PAGE, limits.maxEntries));
    const sources = await this.#guard(() =>
      Promise.all(
        [...bySource.values()].map(async (group) => {
          const s = this.#keys.source(group.tenant, group.source);
          const streams = group.follows.map((f) => ({
            digest: s.streamDigest(subscriptionId(f.subscription)),
            after: readFrom(f, after),
          }));
          const reply = await this.#scripts.readStreams(s.last, { count, streams });
          // [place, rows, place, rows, ...]: only the streams with something new.
          const reads: { entries: StoredEntry[]; full: boolean }[] = [];
          for (let i = 1; i < reply.length; i += 2) {
            const rows = reply[i] as [string, string[]][];
            reads.push({
              entries: rows.map(([id, fields]) => entryOf(group.source, id, fields)),
              full: rows.length === count,
            });
          }
          return mergeStreams(reads);
        }),
      ),
    );
    return mergeSources(sources, limits);
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
    const field = offsetField(topic, partition);
    return this.#guard(() =>
      this.#cluster ? this.#applyPerSource(records, offsets, field) : this.#applyAtOnce(records, offsets, field),
    );
  }

  /** apply-updates.lua's argument for `records`. */
  #args(
    field: string | undefined,
    ownOffsets: boolean,
    all: boolean,
    records: readonly ApplyUpdatesRecord[],
  ): ApplyUpdatesArgs {
    return { field, ttlMs: this.#ttlMs, now: this.#clock.now(), ownOffsets, all, window: DEDUPE_WINDOW, records };
  }

  /** A single Redis: one script over every source of the run plus the global offsets hash. */
  async #applyAtOnce(records: readonly ConsumedRecord[], offsets: string[], field: string): Promise<ApplyResult[]> {
    const layout = new KeyLayout(this.#keys, this.#keys.offsets);
    const packed = records.map((record, r) =>
      recordOf(offsets[r]!, record.update, record.traceparent, record.update ? layout.layout(record.update) : []),
    );
    const codes = await this.#scripts.applyUpdates(layout.keys, this.#args(field, false, false, packed));
    return readResults(records, codes);
  }

  /**
   * Redis Cluster: no script may span slots. The run is checked against the
   * global offset, then each source gets ONE script with its share of the run,
   * checked against its own offsets hash (the field of the partition's reset
   * epoch: a reset starts them over); the scripts of all sources are sent
   * at once (each is atomic for its source, in record order), and the global
   * offset is recorded after all of them succeeded.
   */
  async #applyPerSource(records: readonly ConsumedRecord[], offsets: string[], field: string): Promise<ApplyResult[]> {
    const [stored = null, epoch] = await this.#redis.hmget(this.#keys.offsets, field, offsetEpochField(field));
    const ownField = sourceOffsetField(field, epoch);
    const fresh = (r: number) => stored === null || BigInt(offsets[r]!) > BigInt(stored);
    const bySource = new Map<string, number[]>();
    records.forEach((record, r) => {
      if (!record.update || !fresh(r)) return;
      const key = JSON.stringify([updateTenant(record.update), record.update.source]);
      const list = bySource.get(key);
      if (list) list.push(r);
      else bySource.set(key, [r]);
    });
    const outcomes = new Map<number, AppendOutcome>();
    await Promise.all(
      [...bySource.values()].map(async (rs) => {
        const first = records[rs[0]!]!.update!;
        const layout = new KeyLayout(this.#keys, this.#keys.source(updateTenant(first), first.source).offsets);
        const packed = rs.map((r) => {
          const record = records[r]!;
          return recordOf(offsets[r]!, record.update, record.traceparent, layout.layout(record.update!));
        });
        const codes = await this.#scripts.applyUpdates(layout.keys, this.#args(ownField, true, false, packed));
        // Per record: [1, code, streams], or [-1] when this source stored it before: a duplicate for it.
        let at = 0;
        for (const r of rs) {
          const status = codeAt(codes, at);
          if (status === SKIPPED) {
            outcomes.set(r, { outcome: 'duplicate' });
            at += 1;
          } else {
            outcomes.set(r, outcomeOf(codeAt(codes, at + 1), codeAt(codes, at + 2)));
            at += 3;
          }
        }
      }),
    );
    const results: ApplyResult[] = records.map((record, r) => {
      if (!fresh(r)) return { applied: false };
      return record.update ? { applied: true, outcome: outcomes.get(r)! } : { applied: true };
    });
    const last = offsets.findLastIndex((_, r) => fresh(r));
    if (last >= 0) await this.#scripts.recordOffset(this.#keys.offsets, field, offsets[last]!);
    return results;
  }

  async recordOffset(position: ConsumedPosition): Promise<void> {
    const field = offsetField(position.topic, position.partition);
    const offset = canonicalOffset(position.offset);
    await this.#guard(() => this.#scripts.recordOffset(this.#keys.offsets, field, offset));
  }

  async resumeFrom(topic: string, partition: number): Promise<string | undefined> {
    const stored = await this.#guard(() => this.#redis.hget(this.#keys.offsets, offsetField(topic, partition)));
    return stored === null ? undefined : (BigInt(stored) + 1n).toString();
  }

  async storedPartition(topic: string, partition: number): Promise<StoredPartition> {
    const field = offsetField(topic, partition);
    const [offset, topicId] = await this.#guard(() =>
      this.#redis.hmget(this.#keys.offsets, field, offsetTopicIdField(field)),
    );
    return storedPartitionOf(offset, topicId);
  }

  async rebindPartition(
    topic: string,
    partition: number,
    expected: StoredPartition,
    next: StoredPartition,
  ): Promise<boolean> {
    const field = offsetField(topic, partition);
    const nextFields = {
      offset: next.offset === undefined ? undefined : canonicalOffset(next.offset),
      topicId: next.topicId,
    };
    const written = await this.#guard(() =>
      this.#scripts.rebindPartition(this.#keys.offsets, field, expected, nextFields),
    );
    return written === 1;
  }

  async close(): Promise<void> {
    if (this.#ownsClient) await this.#redis.quit();
  }

  async #guard<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (cause) {
      throw new CtxflowError('store_unavailable', 'the feed stream store did not answer', { cause });
    }
  }
}

/** One record of apply-updates.lua; no update: a record with nothing to apply (its offset alone). */
function recordOf(
  offset: string | undefined,
  update: TicketUpdate | undefined,
  traceparent: string | undefined,
  layout: number[],
): ApplyUpdatesRecord {
  if (!update) return { offset };
  return {
    offset,
    id: update.id,
    key: ticketKey(update),
    version: update.version,
    at: occurredAtMs(update.occurredAt),
    update: JSON.stringify(update),
    traceparent,
    layout,
  };
}

/** apply-updates.lua's flat answer, per record: -1 (skipped), or 1 and, with an update, its code and stream count. */
function readResults(records: readonly ConsumedRecord[], codes: number[]): ApplyResult[] {
  let at = 0;
  return records.map((record) => {
    const status = codeAt(codes, at++);
    if (status === SKIPPED) return { applied: false };
    if (status !== APPLIED) throw new Error(`apply-updates.lua returned an unknown status ${status}`);
    if (!record.update) return { applied: true };
    const outcome = outcomeOf(codeAt(codes, at), codeAt(codes, at + 1));
    at += 2;
    return { applied: true, outcome };
  });
}

function codeAt(codes: number[], at: number): number {
  const code = codes[at];
  if (code === undefined) throw new Error('apply-updates.lua returned too few codes');
  return code;
}

function entryOf(source: FeedSource, id: string, fields: string[]): StoredEntry {
  const traceparent = optionalField(fields, 'trace');
  const json = optionalField(fields, 'update');
  if (json === undefined) throw new Error('feed stream entry without field update');
  const entry: FeedEntry = {
    source,
    seq: Number.parseInt(id, 10),
    update: JSON.parse(json) as TicketUpdate,
    ...(traceparent ? { traceparent } : {}),
  };
  return { entry, order: Number(optionalField(fields, 'w') ?? 0) };
}

function optionalField(fields: string[], name: string): string | undefined {
  for (let i = 0; i < fields.length; i += 2) if (fields[i] === name) return fields[i + 1]!;
  return undefined;
}
