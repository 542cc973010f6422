import { randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { CtxflowError } from '@ctxflow/contracts';
import type { Cluster, Redis } from 'ioredis';
import type { LogEntry, RowEntry } from '../domain/model.ts';
import { type OutboxEntry, outboxRows, type RowOutbox, shardOf } from '../ports/row-outbox.ts';
import { type StoreKeys, storeKeys } from './redis/keys.ts';

/**
 * The row outbox on Redis (events and receipts), on a standalone Redis or a Cluster.
 *
 * Each session has its own outbox stream (keys.ts `outbox`, in the session's slot), which
 * the commit script writes in the same write as the rows (commit-step.lua, KEYS[11]).
 * Sessions are spread over `shards` shards (`shardOf`, ports/row-outbox.ts). A relay must
 * find the sessions whose outbox holds entries without scanning the keyspace: per shard an
 * index (`outboxIndex`, a sorted set in a slot of its own) names them. A script cannot write
 * both slots, so the store MARKS the session in its shard's index before its commit
 * (`mark`), each mark with a new score (its time in µs plus a random part). Then:
 * - a commit that landed is in an outbox whose session is in the index (its mark came first);
 * - a mark whose commit failed leaves an empty outbox: harmless;
 * - the relay drops a session from the index only when its outbox is empty, its mark is
 *   older than `graceMs` (every commit lands well within it of its mark: the store marks
 *   again when one took longer) and no commit marked it since it read the mark
 *   (outbox-unmark.lua).
 *
 * A relay reads a shard only while it holds the shard's lease (outbox-lease.lua, `leaseMs`,
 * renewed by every `lease` call; outbox-release.lua gives it up). It serves first the
 * sessions of the shard this process committed, then sweeps the shard's index page by page
 * (what other processes committed, or a relay that died left). An entry is removed
 * (outbox-ack.lua) by its stream id; an emptied stream is kept until the session expires, so
 * its ids only grow and a removed id never names another entry.
 */
export interface RedisRowOutboxOptions {
  /** Key prefix (CTXFLOW_REDIS_PREFIX); the session store's. */
  prefix?: string;
  /** Shards the sessions are spread over (CTXFLOW_CONTEXT_ROW_SHARDS); default 4. */
  shards?: number;
  /** How long a relay holds a shard before another may take it (ms); default 5000. */
  leaseMs?: number;
  /** How old a mark must be before the sweep may drop it (ms); default 30000. */
  graceMs?: number;
  /**
   * This relay's name in the leases; default `<hostname>:<pid>`. A name that stays the same
   * across restarts (the host and port) lets a restarted relay take its own leases at once.
   */
  owner?: string;
  /**
   * CTXFLOW_CONTEXT_ROW_EVENTS (default true): the outbox takes every row of a commit; false:
   * only the rows that carry ticket updates (the receipts'), and a commit without one writes
   * nothing here and marks nothing.
   */
  events?: boolean;
}

type Scripts = {
  ctxOutboxLease: (lease: string, owner: string, ms: string) => Promise<number>;
  ctxOutboxRelease: (lease: string, owner: string) => Promise<number>;
  ctxOutboxAck: (stream: string, ...ids: string[]) => Promise<number>;
  ctxOutboxUnmark: (index: string, member: string, score: string) => Promise<number>;
};

function lua(file: string): string {
  return readFileSync(new URL(`./redis/${file}`, import.meta.url), 'utf8');
}

/** Sessions the sweep reads from an index at once. */
const SWEEP_PAGE = 100;

interface Marked {
  tenant: string;
  sessionId: string;
  member: string;
  /** The mark's score as Redis wrote it, when older than the grace; undefined: never dropped on this read. */
  score?: string;
}

export class RedisRowOutbox implements RowOutbox {
  readonly shards: number;
  readonly #client: Redis | Cluster;
  readonly #scripts: Scripts;
  readonly #keys: StoreKeys;
  readonly #leaseMs: number;
  readonly #graceMs: number;
  readonly #owner: string;
  readonly #events: boolean;
  /** Per shard, where the next sweep of its index starts. */
  readonly #sweepAt: number[];
  /** Per shard, the sessions this process committed rows of, not yet seen empty: member -> session. */
  readonly #recent: Map<string, Marked>[];
  readonly #listeners: (() => void)[] = [];

  constructor(client: Redis | Cluster, options: RedisRowOutboxOptions = {}) {
    this.#client = client;
    this.#keys = storeKeys(options.prefix);
    this.shards = options.shards ?? 4;
    this.#leaseMs = options.leaseMs ?? 5_000;
    this.#graceMs = options.graceMs ?? 30_000;
    this.#owner = options.owner ?? `${hostname()}:${process.pid}`;
    this.#events = options.events ?? true;
    this.#sweepAt = Array.from({ length: this.shards }, () => 0);
    this.#recent = Array.from({ length: this.shards }, () => new Map());
    const defined = client as unknown as Partial<Scripts>;
    const scripts = {
      ctxOutboxLease: 'outbox-lease.lua',
      ctxOutboxRelease: 'outbox-release.lua',
      ctxOutboxAck: 'outbox-ack.lua',
      ctxOutboxUnmark: 'outbox-unmark.lua',
    };
    for (const [name, file] of Object.entries(scripts)) {
      if (typeof defined[name as keyof Scripts] !== 'function')
        client.defineCommand(name, { numberOfKeys: 1, lua: lua(file) });
    }
    this.#scripts = client as unknown as Scripts;
  }

  /**
   * The store, before a commit: which of its entries go to the outbox, `all` (events on) or
   * their indexes (the rows that carry ticket updates; empty: none, and no mark is needed).
   */
  rowsOf(entries: readonly LogEntry[]): 'all' | number[] {
    return this.#events ? 'all' : outboxRows(entries, false);
  }

  /** The outbox stream the commit script writes (KEYS[11]). */
  streamKey(sessionId: string): string {
    return this.#keys.session(sessionId).outbox;
  }

  /** The store, before a commit that may write rows: marks the session in its shard's index. Returns the mark's time (ms). */
  async mark(tenant: string, sessionId: string): Promise<number> {
    const now = Date.now();
    const member = JSON.stringify([tenant, sessionId]);
    const index = this.#keys.outboxIndex(shardOf(sessionId, this.shards));
    await this.#guard(() => this.#client.zadd(index, now * 1000 + randomInt(1000), member));
    return now;
  }

  /** The store, after a commit that wrote rows: the relay wakes; a commit slow to land is marked again. */
  async committed(tenant: string, sessionId: string, markedAt: number): Promise<void> {
    // The commit stands: a failed mark again leaves only the (rare) slow-commit case uncovered.
    if (Date.now() - markedAt > this.#graceMs / 2) await this.mark(tenant, sessionId).catch(() => undefined);
    const member = JSON.stringify([tenant, sessionId]);
    this.#recent[shardOf(sessionId, this.shards)]!.set(member, { tenant, sessionId, member });
    for (const listener of this.#listeners) queueMicrotask(listener);
  }

  onAppend(listener: () => void): void {
    this.#listeners.push(listener);
  }

  async lease(shard: number): Promise<boolean> {
    const held = await this.#guard(() =>
      this.#scripts.ctxOutboxLease(this.#keys.outboxLease(shard), this.#owner, String(this.#leaseMs)),
    );
    // Another relay holds the shard: it finds this process's sessions in the index.
    if (held !== 1) this.#recent[shard]?.clear();
    return held === 1;
  }

  async release(shard: number): Promise<void> {
    await this.#guard(() => this.#scripts.ctxOutboxRelease(this.#keys.outboxLease(shard), this.#owner));
  }

  async pending(shard: number, max: number): Promise<OutboxEntry[]> {
    const out: OutboxEntry[] = [];
    const recent = this.#recent[shard];
    if (recent === undefined) return out;
    const served = [...recent.values()];
    await this.#take(shard, served, max, out);
    if (out.length >= max) return out;
    const taken = new Set(served.map((s) => s.member));
    const graceCutoff = (Date.now() - this.#graceMs) * 1000;
    const offset = this.#sweepAt[shard]!;
    const flat = await this.#guard(() =>
      this.#client.zrangebyscore(
        this.#keys.outboxIndex(shard),
        '-inf',
        '+inf',
        'WITHSCORES',
        'LIMIT',
        offset,
        SWEEP_PAGE,
      ),
    );
    // The next sweep reads the next page; after the last, the first again.
    this.#sweepAt[shard] = flat.length / 2 < SWEEP_PAGE ? 0 : offset + SWEEP_PAGE;
    const swept: Marked[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      if (taken.has(flat[i]!)) continue;
      const [tenant, sessionId] = JSON.parse(flat[i]!) as [string, string];
      // A mark younger than the grace may belong to a commit still landing: never dropped.
      const old = Number(flat[i + 1]) <= graceCutoff;
      swept.push({ tenant, sessionId, member: flat[i]!, ...(old ? { score: flat[i + 1]! } : {}) });
    }
    await this.#take(shard, swept, max, out);
    return out;
  }

  /** Reads the outboxes of `sessions`, up to `max` entries in all, into `out`. */
  async #take(shard: number, sessions: Marked[], max: number, out: OutboxEntry[]): Promise<void> {
    for (const session of sessions) {
      if (out.length >= max) return;
      const stream = this.streamKey(session.sessionId);
      const read = await this.#guard(() => this.#client.xrange(stream, '-', '+', 'COUNT', max - out.length));
      if (read.length === 0) {
        this.#recent[shard]?.delete(session.member);
        if (session.score !== undefined) {
          const { member, score } = session;
          await this.#guard(() => this.#scripts.ctxOutboxUnmark(this.#keys.outboxIndex(shard), member, score));
        }
        continue;
      }
      for (const [id, fields] of read) {
        const at = fields.indexOf('row');
        const row = JSON.parse(fields[at + 1]!) as RowEntry;
        const entry: OutboxEntry = { ref: id, tenant: session.tenant, sessionId: session.sessionId, row };
        const request = fields.indexOf('request');
        if (request >= 0 && request % 2 === 0) entry.requestId = fields[request + 1]!;
        out.push(entry);
      }
    }
  }

  async acknowledge(entries: readonly Pick<OutboxEntry, 'sessionId' | 'ref'>[]): Promise<void> {
    const bySession = new Map<string, string[]>();
    for (const entry of entries) {
      const ids = bySession.get(entry.sessionId) ?? [];
      ids.push(entry.ref);
      bySession.set(entry.sessionId, ids);
    }
    await Promise.all(
      [...bySession].map(([sessionId, ids]) =>
        this.#guard(() => this.#scripts.ctxOutboxAck(this.streamKey(sessionId), ...ids)),
      ),
    );
  }

  async #guard<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (cause) {
      throw new CtxflowError('store_unavailable', 'the row outbox did not answer', { cause });
    }
  }
}
