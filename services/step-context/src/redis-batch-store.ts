import { readFileSync } from 'node:fs';
import { CtxflowError, type TicketUpdate, ticketKey } from '@ctxflow/contracts';
import type { Cluster, Redis } from 'ioredis';
import {
  type AppendOutcome,
  type ApplyResult,
  type BatchEntry,
  type BatchStore,
  type ConsumedPosition,
  canonicalOffset,
  occurredAtMs,
} from './batch-store.ts';
import { offsetField, type StepContextKeys, stepContextKeys } from './redis-keys.ts';

const lua = (name: string) => readFileSync(new URL(`./lua/${name}`, import.meta.url), 'utf8');
const PRELUDE = lua('append-entry.lua');
const APPLY_UPDATE = `${PRELUDE}\n${lua('apply-update.lua')}`;
const COPY_SESSION = `${PRELUDE}\n${lua('copy-session.lua')}`;
const RECORD_OFFSET = lua('record-offset.lua');

/** Refusal codes of the scripts (see their headers). */
const OFFSET_REFUSED = -1;
const DUPLICATE = 0;
const STALE = -2;

/** Entries per XRANGE call of readSince. */
const READ_PAGE = 50;

interface BatchCommands {
  ctxApplyUpdate(numberOfKeys: number, ...args: string[]): Promise<number | number[]>;
  ctxCopySession(...args: string[]): Promise<number>;
  ctxRecordOffset(...args: string[]): Promise<number>;
}

type Client = (Redis | Cluster) & BatchCommands;

/** One function maps a script's per-session code to an outcome. */
function outcomeOf(code: number): AppendOutcome {
  if (code > 0) return { outcome: 'appended', cursor: code };
  if (code === DUPLICATE || code === OFFSET_REFUSED) return { outcome: 'duplicate' };
  if (code === STALE) return { outcome: 'stale' };
  throw new Error(`apply-update.lua returned an unknown code ${code}`);
}

/**
 * Batch streams on Redis: one stream per session (entry id `<cursor>-0`), with
 * its sequence, applied ids and staleness marks, all under the session's hash
 * tag; each atomic write is one Lua script (src/lua).
 *
 * Fan-out and Redis Cluster: one ticket update goes to several sessions, i.e.
 * several hash slots. On a single Redis, `applyUpdate` is ONE script over every
 * session's keys plus the global offsets hash. On Redis Cluster (detected from
 * the client, or `cluster: true`) no script may span slots, so it runs one
 * script per session, each idempotent by update id AND checked against that
 * session's own stored offset, then records the global offset last (never
 * backwards). A crash between them redelivers the record from the old global
 * offset; the sessions already written refuse it, the others get it: still
 * exactly once per session.
 *
 * A Redis failure surfaces as a retryable `store_unavailable` refusal.
 */
export class RedisBatchStore implements BatchStore {
  readonly #redis: Client;
  readonly #keys: StepContextKeys;
  readonly #cluster: boolean;
  readonly #ownsClient: boolean;

  /** `ownsClient`: close() also quits the client (default false: the caller shares it). */
  constructor(options: { redis: Redis | Cluster; prefix?: string; cluster?: boolean; ownsClient?: boolean }) {
    const redis = options.redis as Client;
    if (typeof redis.ctxApplyUpdate !== 'function') {
      redis.defineCommand('ctxApplyUpdate', { lua: APPLY_UPDATE });
      redis.defineCommand('ctxCopySession', { numberOfKeys: 5, lua: COPY_SESSION });
      redis.defineCommand('ctxRecordOffset', { numberOfKeys: 1, lua: RECORD_OFFSET });
    }
    this.#redis = redis;
    this.#keys = stepContextKeys(options.prefix ?? 'ctxflow');
    this.#cluster = options.cluster ?? (options.redis as { isCluster?: boolean }).isCluster === true;
    this.#ownsClient = options.ownsClient ?? false;
  }

  async append(sessionId: string, update: TicketUpdate): Promise<AppendOutcome> {
    const s = this.#keys.session(sessionId);
    const result = await this.#guard(() =>
      this.#redis.ctxApplyUpdate(
        5,
        s.offsets,
        s.stream,
        s.seq,
        s.ids,
        s.marks,
        '',
        '',
        ...updateArgs(update, undefined),
      ),
    );
    return outcomeOf(firstCode(result));
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
      await this.#redis.ctxCopySession(to.stream, to.seq, to.ids, to.marks, to.offsets, snapshot);
    });
  }

  async applyUpdate(
    update: TicketUpdate,
    sessionIds: readonly string[],
    position: ConsumedPosition,
    trace: { traceparent?: string } = {},
  ): Promise<ApplyResult> {
    const field = offsetField(position.topic, position.partition);
    const offset = canonicalOffset(position.offset);
    const args = updateArgs(update, trace.traceparent);
    return this.#guard(async () => {
      if (!this.#cluster) {
        const keys = sessionIds.flatMap((id) => {
          const s = this.#keys.session(id);
          return [s.stream, s.seq, s.ids, s.marks];
        });
        const result = await this.#redis.ctxApplyUpdate(
          1 + keys.length,
          this.#keys.offsets,
          ...keys,
          field,
          offset,
          ...args,
        );
        if (result === OFFSET_REFUSED) return { applied: false };
        const codes = result as number[];
        return { applied: true, sessions: Object.fromEntries(sessionIds.map((id, i) => [id, outcomeOf(codes[i]!)])) };
      }
      const stored = await this.#redis.hget(this.#keys.offsets, field);
      if (stored !== null && BigInt(stored) >= BigInt(offset)) return { applied: false };
      const sessions: Record<string, AppendOutcome> = {};
      for (const id of sessionIds) {
        const s = this.#keys.session(id);
        const result = await this.#redis.ctxApplyUpdate(
          5,
          s.offsets,
          s.stream,
          s.seq,
          s.ids,
          s.marks,
          field,
          offset,
          ...args,
        );
        sessions[id] = outcomeOf(firstCode(result));
      }
      await this.#redis.ctxRecordOffset(this.#keys.offsets, field, offset);
      return { applied: true, sessions };
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

/** ARGV[3..8] of apply-update.lua. */
function updateArgs(update: TicketUpdate, traceparent: string | undefined): string[] {
  const at = occurredAtMs(update.occurredAt);
  return [
    update.id,
    ticketKey(update),
    update.version === undefined ? '' : String(update.version),
    at === undefined ? '' : String(at),
    JSON.stringify(update),
    traceparent ?? '',
  ];
}

function firstCode(result: number | number[]): number {
  if (typeof result === 'number') return result;
  const code = result[0];
  if (code === undefined) throw new Error('apply-update.lua returned no code');
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
