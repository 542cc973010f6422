import { readFileSync } from 'node:fs';
import { CtxflowError, type TicketUpdate, ticketKey } from '@ctxflow/contracts';
import type { Cluster, Redis } from 'ioredis';
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
  occurredAtMs,
} from '../ports/batch-store.ts';
import { offsetField, type StepContextKeys, stepContextKeys } from './redis/keys.ts';

const lua = (name: string) => readFileSync(new URL(`./redis/${name}`, import.meta.url), 'utf8');
const PRELUDE = lua('append-entry.lua');
const APPLY_BATCH = `${PRELUDE}\n${lua('apply-batch.lua')}`;
const COPY_SESSION = `${PRELUDE}\n${lua('copy-session.lua')}`;
const RECORD_OFFSET = lua('record-offset.lua');

/** Codes of the scripts (see their headers). */
const SKIPPED = -1;
const APPLIED = 1;
const DUPLICATE = 0;
const STALE = -2;
const NOT_SUBSCRIBED = -3;

/** Entries per XRANGE call of readSince. */
const READ_PAGE = 50;

interface BatchCommands {
  ctxApplyBatch(numberOfKeys: number, ...args: string[]): Promise<number[]>;
  ctxCopySession(...args: string[]): Promise<number>;
  ctxRecordOffset(...args: string[]): Promise<number>;
}

type Client = (Redis | Cluster) & BatchCommands;

/** One function maps a script's per-session code to an outcome. */
function outcomeOf(code: number): AppendOutcome {
  if (code > 0) return { outcome: 'appended', cursor: code };
  if (code === DUPLICATE) return { outcome: 'duplicate' };
  if (code === STALE) return { outcome: 'stale' };
  if (code === NOT_SUBSCRIBED) return { outcome: 'unsubscribed' };
  throw new Error(`apply-batch.lua returned an unknown code ${code}`);
}

/**
 * Batch streams on Redis: one stream per session (entry id `<cursor>-0`), with
 * its sequence, applied ids and staleness marks, all under the session's hash
 * tag; each atomic write is one Lua script (adapters/redis/*.lua).
 *
 * Fan-out and Redis Cluster: one ticket update goes to several sessions, i.e.
 * several hash slots. On a single Redis, `applyBatch` (and `applyUpdate`, a
 * run of one) is ONE script (apply-batch.lua) over every session's keys of the
 * run plus the global offsets hash: one round trip per run of records. On
 * Redis Cluster (detected from the client, or `cluster: true`) no script may
 * span slots, so it runs one script per session with that session's share of
 * the run, all sent at once, each idempotent by update id AND checked against
 * that session's own stored offset, then records the global offset last (never
 * backwards). A crash between them redelivers the run from the old global
 * offset; the sessions already written skip what they stored, the others get
 * it: still exactly once per session.
 *
 * Erasure and retention: `erase` deletes the session's keys in one DEL (one
 * slot). With `subscribedOnly`, a consumed update is appended only to sessions
 * whose subscriptions set (the subscription store's, same prefix) is not empty,
 * checked inside the script: an apply in flight while the session is erased
 * (its subscriptions go first) writes nothing for it. With `ttlMs`, every
 * script that writes a session gives its keys (subscriptions included) that TTL.
 *
 * A Redis failure surfaces as a retryable `store_unavailable` refusal.
 */
export class RedisBatchStore implements BatchStore {
  readonly #redis: Client;
  readonly #keys: StepContextKeys;
  readonly #cluster: boolean;
  readonly #ownsClient: boolean;
  /** ARGV of apply-batch.lua: the retention, and '1' for `subscribedOnly`. */
  readonly #ttl: string;
  readonly #subscribedOnly: string;

  /**
   * `ownsClient`: close() also quits the client (default false: the caller shares it).
   * `ttlMs`: retention of a session's keys after each write (CTXFLOW_SESSION_TTL_MS; default 0, kept).
   * `subscribedOnly`: applyBatch writes only to sessions that still have a subscription (default false).
   */
  constructor(options: {
    redis: Redis | Cluster;
    prefix?: string;
    cluster?: boolean;
    ownsClient?: boolean;
    ttlMs?: number;
    subscribedOnly?: boolean;
  }) {
    const redis = options.redis as Client;
    if (typeof redis.ctxApplyBatch !== 'function') {
      redis.defineCommand('ctxApplyBatch', { lua: APPLY_BATCH });
      redis.defineCommand('ctxCopySession', { numberOfKeys: 5, lua: COPY_SESSION });
      redis.defineCommand('ctxRecordOffset', { numberOfKeys: 1, lua: RECORD_OFFSET });
    }
    this.#redis = redis;
    this.#keys = stepContextKeys(options.prefix ?? 'ctxflow');
    this.#cluster = options.cluster ?? (options.redis as { isCluster?: boolean }).isCluster === true;
    this.#ownsClient = options.ownsClient ?? false;
    this.#ttl = String(options.ttlMs ?? 0);
    this.#subscribedOnly = options.subscribedOnly === true ? '1' : '';
  }

  async append(sessionId: string, update: TicketUpdate): Promise<AppendOutcome> {
    const s = this.#keys.session(sessionId);
    const codes = await this.#guard(() =>
      this.#redis.ctxApplyBatch(
        6,
        s.offsets,
        s.stream,
        s.seq,
        s.ids,
        s.marks,
        s.subscriptions,
        '',
        this.#ttl,
        '',
        '',
        ...recordArgs('', update, '', '1'),
      ),
    );
    // [1, code]: a plain append is never skipped.
    return outcomeOf(codeAt(codes, 1));
  }

  async readSince(
    sessionId: string,
    after: number,
    limits: { maxEntries: number; maxBytes: number },
  ): Promise<BatchEntry[]> {
    if (!Number.isSafeInteger(after) || after < 0) throw new Error(`cursor ${after} is not a non-negative integer`);
    const stream = this.#keys.session(sessionId).stream;
    const out: BatchEntry[] = [];
    let bytes = 0;
    let start = `${after + 1}-0`;
    // Pages of READ_PAGE entries, so a small byte limit never pulls a long stream over the wire.
    while (out.length < limits.maxEntries && bytes <= limits.maxBytes) {
      const count = Math.min(READ_PAGE, limits.maxEntries - out.length);
      const rows = await this.#guard(() => this.#redis.xrange(stream, start, '+', 'COUNT', count));
      for (const [id, fields] of rows) {
        if (bytes > limits.maxBytes) break;
        const json = fieldValue(fields, 'update');
        const cursor = Number.parseInt(id, 10);
        const traceparent = optionalField(fields, 'trace');
        out.push({ cursor, update: JSON.parse(json) as TicketUpdate, ...(traceparent ? { traceparent } : {}) });
        bytes += Buffer.byteLength(json, 'utf8');
        start = `${cursor + 1}-0`;
      }
      if (rows.length < count) break;
    }
    return out;
  }

  async copy(fromSessionId: string, toSessionId: string): Promise<void> {
    const from = this.#keys.session(fromSessionId);
    const to = this.#keys.session(toSessionId);
    await this.#guard(async () => {
      const replies = await this.#redis
        .multi()
        .xrange(from.stream, '-', '+')
        .get(from.seq)
        .smembers(from.ids)
        .hgetall(from.marks)
        .hgetall(from.offsets)
        .exec();
      if (!replies) throw new Error('the snapshot transaction was aborted');
      for (const [err] of replies) if (err) throw err;
      const [entries, seq, ids, marks, offsets] = replies.map(([, value]) => value) as [
        [string, string[]][],
        string | null,
        string[],
        Record<string, string>,
        Record<string, string>,
      ];
      const snapshot = JSON.stringify({
        seq: seq ?? '',
        entries,
        ids,
        marks: Object.entries(marks).flat(),
        offsets: Object.entries(offsets).flat(),
      });
      await this.#redis.ctxCopySession(to.stream, to.seq, to.ids, to.marks, to.offsets, snapshot, this.#ttl);
    });
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
    const field = offsetField(topic, partition);
    return this.#guard(() =>
      this.#cluster ? this.#applyPerSession(records, offsets, field) : this.#applyAtOnce(records, offsets, field),
    );
  }

  /** A single Redis: one script over every session of the run plus the global offsets hash. */
  async #applyAtOnce(records: readonly BatchRecord[], offsets: string[], field: string): Promise<ApplyResult[]> {
    const index = new Map<string, number>();
    const keys: string[] = [this.#keys.offsets];
    const args: string[] = [field, this.#ttl, this.#subscribedOnly, ''];
    records.forEach((record, r) => {
      const positions: number[] = [];
      if (record.update) {
        for (const id of record.sessionIds ?? []) {
          let i = index.get(id);
          if (i === undefined) {
            i = index.size + 1;
            index.set(id, i);
            const s = this.#keys.session(id);
            keys.push(s.stream, s.seq, s.ids, s.marks, s.subscriptions);
          }
          positions.push(i);
        }
      }
      args.push(...recordArgs(offsets[r]!, record.update, record.traceparent ?? '', positions.join(' ')));
    });
    const codes = await this.#redis.ctxApplyBatch(keys.length, ...keys, ...args);
    return readResults(records, codes);
  }

  /**
   * Redis Cluster: no script may span slots. The run is checked against the
   * global offset, then each session gets ONE script with its share of the
   * run, checked against its own offsets hash; the scripts of all sessions are
   * sent at once (each is atomic for its session, in record order), and the
   * global offset is recorded after all of them succeeded.
   */
  async #applyPerSession(records: readonly BatchRecord[], offsets: string[], field: string): Promise<ApplyResult[]> {
    const stored = await this.#redis.hget(this.#keys.offsets, field);
    const fresh = (r: number) => stored === null || BigInt(offsets[r]!) > BigInt(stored);
    const bySession = new Map<string, number[]>();
    records.forEach((record, r) => {
      if (!record.update || !fresh(r)) return;
      for (const id of new Set(record.sessionIds ?? [])) {
        const list = bySession.get(id);
        if (list) list.push(r);
        else bySession.set(id, [r]);
      }
    });
    const outcomes = await Promise.all(
      [...bySession].map(async ([id, rs]) => {
        const s = this.#keys.session(id);
        const args = rs.flatMap((r) => recordArgs(offsets[r]!, records[r]!.update, records[r]!.traceparent ?? '', '1'));
        const codes = await this.#redis.ctxApplyBatch(
          6,
          s.offsets,
          s.stream,
          s.seq,
          s.ids,
          s.marks,
          s.subscriptions,
          field,
          this.#ttl,
          this.#subscribedOnly,
          '1',
          ...args,
        );
        // Per record: [1, code], or [-1] when this session stored it before: a duplicate for the session.
        const out = new Map<number, AppendOutcome>();
        let at = 0;
        for (const r of rs) {
          const status = codeAt(codes, at);
          out.set(r, status === SKIPPED ? { outcome: 'duplicate' } : outcomeOf(codeAt(codes, at + 1)));
          at += status === SKIPPED ? 1 : 2;
        }
        return [id, out] as const;
      }),
    );
    const byId = new Map(outcomes);
    const results: ApplyResult[] = records.map((record, r) => {
      if (!fresh(r)) return { applied: false };
      const sessions: Record<string, AppendOutcome> = {};
      if (record.update) for (const id of record.sessionIds ?? []) sessions[id] = byId.get(id)!.get(r)!;
      return { applied: true, sessions };
    });
    const last = offsets.findLastIndex((_, r) => fresh(r));
    if (last >= 0) await this.#redis.ctxRecordOffset(this.#keys.offsets, field, offsets[last]!);
    return results;
  }

  async erase(sessionId: string): Promise<void> {
    const s = this.#keys.session(sessionId);
    await this.#guard(() => this.#redis.del(s.stream, s.seq, s.ids, s.marks, s.offsets));
  }

  async touch(sessionId: string): Promise<void> {
    if (this.#ttl === '0') return;
    const s = this.#keys.session(sessionId);
    const keys = [s.stream, s.seq, s.ids, s.marks, s.offsets, s.subscriptions];
    // One slot: one pipeline, one node.
    await this.#guard(async () => {
      const pipeline = this.#redis.pipeline();
      for (const key of keys) pipeline.pexpire(key, this.#ttl);
      await pipeline.exec();
    });
  }

  async recordOffset(position: ConsumedPosition): Promise<void> {
    const field = offsetField(position.topic, position.partition);
    const offset = canonicalOffset(position.offset);
    await this.#guard(() => this.#redis.ctxRecordOffset(this.#keys.offsets, field, offset));
  }

  async resumeFrom(topic: string, partition: number): Promise<string | undefined> {
    const stored = await this.#guard(() => this.#redis.hget(this.#keys.offsets, offsetField(topic, partition)));
    return stored === null ? undefined : (BigInt(stored) + 1n).toString();
  }

  async close(): Promise<void> {
    if (this.#ownsClient) await this.#redis.quit();
  }

  async #guard<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (cause) {
      throw new CtxflowError('store_unavailable', 'the batch store did not answer', { cause });
    }
  }
}

/** The eight ARGV of one record of apply-batch.lua; no update: a record with nothing to apply. */
function recordArgs(offset: string, update: TicketUpdate | undefined, traceparent: string, sessions: string): string[] {
  if (!update) return [offset, '', '', '', '', '', '', ''];
  const at = occurredAtMs(update.occurredAt);
  return [
    offset,
    update.id,
    ticketKey(update),
    update.version === undefined ? '' : String(update.version),
    at === undefined ? '' : String(at),
    JSON.stringify(update),
    traceparent,
    sessions,
  ];
}

/** apply-batch.lua's flat answer, per record: -1 (skipped), or 1 and one code per listed session. */
function readResults(records: readonly BatchRecord[], codes: number[]): ApplyResult[] {
  let at = 0;
  return records.map((record) => {
    const status = codeAt(codes, at++);
    if (status === SKIPPED) return { applied: false };
    if (status !== APPLIED) throw new Error(`apply-batch.lua returned an unknown status ${status}`);
    const sessions: Record<string, AppendOutcome> = {};
    if (record.update) for (const id of record.sessionIds ?? []) sessions[id] = outcomeOf(codeAt(codes, at++));
    return { applied: true, sessions };
  });
}

function codeAt(codes: number[], at: number): number {
  const code = codes[at];
  if (code === undefined) throw new Error('apply-batch.lua returned too few codes');
  return code;
}

function fieldValue(fields: string[], name: string): string {
  const value = optionalField(fields, name);
  if (value === undefined) throw new Error(`batch stream entry without field ${name}`);
  return value;
}

function optionalField(fields: string[], name: string): string | undefined {
  for (let i = 0; i < fields.length; i += 2) if (fields[i] === name) return fields[i + 1]!;
  return undefined;
}
