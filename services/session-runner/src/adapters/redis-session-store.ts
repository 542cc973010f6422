import { CtxflowError } from '@ctxflow/contracts';
import type { Cluster, Redis } from 'ioredis';
import { LRUCache } from 'lru-cache';
import type {
  AgentRecord,
  CallRecord,
  LogEntry,
  MessageEntry,
  NewQueuedItem,
  QueuedItem,
  SessionCarry,
  SessionMeta,
  SessionState,
  StepRecord,
} from '../domain/model.ts';
import type {
  Appended,
  CommitResult,
  EnqueueDedupe,
  EnqueueResult,
  LoadOptions,
  NewMessage,
  RewindCommit,
  SessionStore,
  StepCommit,
  StepRef,
  Written,
} from '../ports/session-store.ts';
import { type StoreKeys, storeKeys } from './redis/keys.ts';
import { DEFAULT_PROMPT_CACHE_BYTES, PromptTexts } from './redis/prompt-texts.ts';
import type { RedisRowOutbox } from './redis-row-outbox.ts';
import { callIdsKeptOf, REQUEST_TRIM_EVERY, requestIdsKeptOf, requestKeysKeptOf } from './request-retention.ts';

export { DEFAULT_PROMPT_CACHE_BYTES, promptEntryBytes } from './redis/prompt-texts.ts';

import {
  COUNTERS,
  type CommitStepArgs,
  parseCalls,
  SessionScripts,
  scriptOutcome,
  storedMeta,
  storedStep,
  versionNonce,
} from './redis/session-scripts.ts';

/** Reply errors of a server that is up but cannot serve now; anything else from Redis is a bug. */
const TRANSIENT_REPLY = /^(LOADING|BUSY|TRYAGAIN|CLUSTERDOWN|MASTERDOWN|READONLY|NOREPLICAS|MOVED|ASK)\b/;

function unavailable(cause: unknown): boolean {
  if (!(cause instanceof Error)) return true;
  if (cause.name === 'ReplyError') return TRANSIENT_REPLY.test(cause.message);
  return true;
}

function parse<T>(json: string): T {
  return JSON.parse(json) as T;
}

export interface RedisSessionStoreOptions {
  /** Key prefix (default `ctx`): keys are `<prefix>:{<sessionId>}:log` etc. No braces. */
  prefix?: string;
  /**
   * Estimated bytes each of the two prompt caches (text -> id, id -> text) holds
   * at most; default {@link DEFAULT_PROMPT_CACHE_BYTES}. A prompt bigger than
   * this is not cached (its id is computed, its text read from Redis).
   */
  promptCacheBytes?: number;
  /** Request-id records a session keeps (request-retention.ts); default DEFAULT_REQUEST_IDS_KEPT. */
  requestIdsKept?: number;
  /** Call records a session keeps, with their call sites (request-retention.ts); default DEFAULT_CALL_IDS_KEPT. */
  callIdsKept?: number;
  /** App request keys a session keeps (request-retention.ts); default DEFAULT_REQUEST_KEYS_KEPT. */
  requestKeysKept?: number;
  /**
   * Retention in ms (CTXFLOW_SESSION_TTL_MS): every write gives all of the session's keys
   * this TTL, so an idle session expires whole. 0 (default): kept until deleted.
   */
  ttlMs?: number;
  /**
   * The row outbox (events and receipts): a step commit also writes the rows it takes
   * (`rowsOf`) to the session's outbox stream, in the same script (commit-step.lua KEYS[11]),
   * marked in the outbox's index first (redis-row-outbox.ts).
   */
  outbox?: RedisRowOutbox;
}

/** Session ids read from a tenant's index at once. */
const INDEX_PAGE = 200;

/**
 * The session store on Redis or a Redis Cluster (see redis/keys.ts for the key
 * shapes). Every write of a session is ONE Lua script over keys sharing the
 * session's hash tag, so each method is atomic on its own; each script checks
 * everything before its first write, because Redis never rolls a script back.
 * The tenant index is another slot: it is written after the session and may
 * name a session that is gone (deleted or expired), which listSessions and
 * sessionsOfAgent skip and remove from it.
 *
 * A Redis that does not answer surfaces as a retryable `store_unavailable`.
 *
 * Over ~400 lines because it is one method per SessionStore member (about twenty), each a thin
 * call of its script: the scripts' builders and codecs are redis/session-scripts.ts, the
 * system prompts redis/prompt-texts.ts.
 */
export class RedisSessionStore implements SessionStore {
  readonly #client: Redis | Cluster;
  readonly #commands: SessionScripts;
  readonly #outbox: RedisRowOutbox | undefined;
  /** Request-id records a session keeps (trim-requests.lua). */
  readonly #requestIdsKept: number;
  /** Call records and app request keys a session keeps (put-call.lua, enqueue.lua). */
  readonly #callIdsKept: number;
  readonly #requestKeysKept: number;
  readonly #keys: StoreKeys;
  /** System prompt text -> its id, and back: step records name prompts by id. */
  readonly #prompts: PromptTexts;
  /**
   * sessionId -> the id of the prompt its `counters` hash names (the last commit stored or used it):
   * a commit of that prompt sends its id alone. Only a hint: the commit script checks it.
   */
  readonly #sessionPrompts = new LRUCache<string, string>({ max: 10_000 });

  constructor(client: Redis | Cluster, options: RedisSessionStoreOptions = {}) {
    this.#keys = storeKeys(options.prefix);
    this.#prompts = new PromptTexts(options.promptCacheBytes ?? DEFAULT_PROMPT_CACHE_BYTES);
    const ttlMs = options.ttlMs ?? 0;
    if (!Number.isSafeInteger(ttlMs) || ttlMs < 0) throw new Error(`ttlMs ${ttlMs} is not a non-negative integer`);
    this.#commands = new SessionScripts(client, this.#keys, ttlMs);
    this.#outbox = options.outbox;
    this.#requestIdsKept = requestIdsKeptOf(options.requestIdsKept);
    this.#callIdsKept = callIdsKeptOf(options.callIdsKept);
    this.#requestKeysKept = requestKeysKeptOf(options.requestKeysKept);
    this.#client = client;
  }

  // ---------------------------------------------------------------- agents

  async putAgent(agent: AgentRecord): Promise<void> {
    const key = this.#keys.agent(agent.agentId);
    await this.#guard(() => this.#client.hset(key, 'record', JSON.stringify(agent), 'version', String(agent.version)));
  }

  async replaceAgent(agent: AgentRecord, expectedVersion: number): Promise<boolean> {
    const reply = await this.#guard(() => this.#commands.replaceAgent(agent, expectedVersion));
    return !('refusal' in scriptOutcome(reply));
  }

  async getAgent(agentId: string): Promise<AgentRecord | undefined> {
    const json = await this.#guard(() => this.#client.hget(this.#keys.agent(agentId), 'record'));
    return json === null ? undefined : parse<AgentRecord>(json);
  }

  async deleteAgent(agentId: string): Promise<void> {
    await this.#guard(() => this.#client.del(this.#keys.agent(agentId)));
  }

  // ---------------------------------------------------------------- sessions

  async createSession(
    meta: SessionMeta,
    log: LogEntry[],
    steps: StepRecord[],
    calls: CallRecord[],
    carry?: SessionCarry,
  ): Promise<string> {
    const prompts = new Map<string, string>();
    const stored = steps.map((step) => {
      const promptId = this.#prompts.idOf(step.system);
      if (promptId !== '') prompts.set(promptId, step.system);
      return storedStep(step, promptId);
    });
    const reply = await this.#guard(() =>
      this.#commands.createSession(meta.sessionId, {
        meta,
        log,
        steps: stored,
        calls,
        sites: carry?.sites ?? [],
        itemSeq: carry?.itemSeq ?? 0,
        prompts,
      }),
    );
    const outcome = scriptOutcome(reply);
    if ('refusal' in outcome) throw new Error(`session ${meta.sessionId} exists`);
    // Another slot: written after the session, so an index entry never names a session
    // that was never created (it may name one that is gone: listSessions skips those).
    const score = Date.parse(meta.createdAt);
    await this.#guard(() =>
      this.#client.zadd(this.#keys.tenantSessions(meta.tenant), Number.isNaN(score) ? 0 : score, meta.sessionId),
    );
    return String(outcome.ok);
  }

  async getMeta(sessionId: string): Promise<SessionMeta | undefined> {
    return this.#readMeta(sessionId);
  }

  /** The meta with its counters (one MULTI: the meta and `counters` are read together). */
  async #readMeta(sessionId: string): Promise<SessionMeta | undefined> {
    const keys = this.#keys.session(sessionId);
    const replies = await this.#guard(() =>
      this.#client
        .multi()
        .get(keys.meta)
        .hmget(keys.counters, ...COUNTERS)
        .exec(),
    );
    if (!replies) throw new CtxflowError('store_unavailable', 'the session store aborted a read; retry');
    for (const [err] of replies) if (err) throw this.#wrap(err);
    const [[, json], [, counters]] = replies as [[null, string | null], [null, (string | null)[]]];
    return json === null ? undefined : storedMeta(json, counters);
  }

  /** One read-only script (load-session.lua): a consistent snapshot, the log whole or from the fold on. */
  async load(sessionId: string, options: LoadOptions = {}): Promise<SessionState | undefined> {
    const reply = await this.#guard(() =>
      this.#commands.loadSession(sessionId, {
        window: options.window === true,
        fields: ['item', 'version', 'prompt', ...COUNTERS],
      }),
    );
    if (reply === null) return undefined;
    const [meta, from, log, queue, calls, sites, [itemSeq, version, prompt, ...counters], requestIds] = reply;
    this.#sessionPrompts.set(sessionId, prompt ?? '');
    return {
      meta: storedMeta(meta, counters),
      log: log.map((entry) => parse<LogEntry>(entry)),
      ...(from > 0 ? { logStart: from } : {}),
      queue: queue.map((item) => parse<QueuedItem>(item)),
      calls: parseCalls(calls),
      sites,
      itemSeq: Number(itemSeq ?? 0),
      requestIds,
      version: version ?? '',
    };
  }

  async listSessions(tenant: string, limit: number): Promise<SessionMeta[]> {
    const index = this.#keys.tenantSessions(tenant);
    const found: SessionMeta[] = [];
    if (limit <= 0) return found;
    // Pages of `limit`, newest first, until `limit` live sessions are found or the index ends
    // (the gone sessions of a page leave the index: the next page starts after its live ones).
    for (let offset = 0; found.length < limit; ) {
      const start = offset;
      const ids = await this.#guard(() => this.#client.zrevrange(index, start, start + limit - 1));
      if (ids.length === 0) break;
      const metas = await this.#indexed(index, ids);
      for (const meta of metas) {
        if (meta.tenant === tenant && found.length < limit) found.push(meta);
      }
      offset += metas.length;
      if (ids.length < limit) break;
    }
    return found;
  }

  async sessionsOfAgent(tenant: string, agentId: string): Promise<string[]> {
    const index = this.#keys.tenantSessions(tenant);
    const found: string[] = [];
    // The whole index, a page at a time (a page's gone sessions leave it: the next page starts earlier).
    for (let offset = 0; ; ) {
      const start = offset;
      const ids = await this.#guard(() => this.#client.zrange(index, String(start), String(start + INDEX_PAGE - 1)));
      if (ids.length === 0) break;
      const metas = await this.#indexed(index, ids);
      for (const meta of metas) if (meta.tenant === tenant && meta.agentId === agentId) found.push(meta.sessionId);
      offset += metas.length;
      if (ids.length < INDEX_PAGE) break;
    }
    return found;
  }

  /** The metas of index entries, in order; entries whose session is gone are removed from the index. */
  async #indexed(index: string, ids: string[]): Promise<SessionMeta[]> {
    const metas = await Promise.all(ids.map((id) => this.#readMeta(id)));
    const gone = ids.filter((_, i) => metas[i] === undefined);
    if (gone.length > 0) await this.#guard(() => this.#client.zrem(index, ...gone));
    return metas.filter((meta): meta is SessionMeta => meta !== undefined);
  }

  async deleteSession(sessionId: string): Promise<void> {
    const meta = await this.#readMeta(sessionId);
    // One DEL of keys sharing one slot: atomic. The meta goes with the rest, so a retry after
    // a failed index update finds nothing to do, and the index entry left is removed when read.
    // The row outbox goes too: rows not yet relayed are neither published nor recorded as
    // receipts (its index entry goes when a relay sees the outbox empty).
    const { outbox } = this.#keys.session(sessionId);
    await this.#guard(() => this.#client.del(...this.#keys.sessionList(sessionId), outbox));
    if (meta !== undefined)
      await this.#guard(() => this.#client.zrem(this.#keys.tenantSessions(meta.tenant), sessionId));
    this.#sessionPrompts.set(sessionId, ''); // a hint only: the next commit sends its prompt's text
  }

  async putMeta(meta: SessionMeta): Promise<boolean> {
    const reply = await this.#guard(() => this.#commands.putMeta(meta));
    return !('refusal' in scriptOutcome(reply));
  }

  // ---------------------------------------------------------------- writes of the engine

  async enqueue(sessionId: string, items: NewQueuedItem[], dedupe?: EnqueueDedupe): Promise<EnqueueResult> {
    const encoded = items.map((item) => JSON.stringify(item));
    const reply = await this.#guard(() =>
      this.#commands.enqueue(sessionId, {
        dedupe:
          dedupe === undefined
            ? undefined
            : dedupe.type === 'key'
              ? { key: dedupe.key, fingerprint: dedupe.fingerprint }
              : { site: `${dedupe.callId}|${dedupe.site}` },
        items: encoded,
        keysKept: this.#requestKeysKept,
      }),
    );
    const outcome = scriptOutcome(reply);
    if ('refusal' in outcome) {
      switch (outcome.refusal) {
        case 'replayed':
          return { outcome: 'replayed' };
        case 'key_conflict':
          return { outcome: 'conflict' };
        default:
          return { outcome: 'not_found' };
      }
    }
    const [last, version, previous] = outcome.ok as [number, string, string];
    const first = last - items.length + 1;
    return {
      outcome: 'recorded',
      // Copies of the items as stored: parsed from the JSON sent.
      items: encoded.map((json, i) => ({ ...(JSON.parse(json) as NewQueuedItem), itemId: `itm_${first + i}` })),
      written: { version, previous },
    };
  }

  async keyFingerprint(sessionId: string, key: string): Promise<string | undefined> {
    const reply = await this.#guard(() => this.#commands.keyFingerprint(sessionId, key));
    return reply ?? undefined;
  }

  appendMessages(sessionId: string, messages: NewMessage[], meta?: SessionMeta): Promise<Appended>;
  appendMessages(
    sessionId: string,
    messages: NewMessage[],
    meta: SessionMeta | undefined,
    expectedVersion: string,
    calls?: readonly CallRecord[],
  ): Promise<Appended | 'conflict'>;
  async appendMessages(
    sessionId: string,
    messages: NewMessage[],
    meta?: SessionMeta,
    expectedVersion?: string,
    calls?: readonly CallRecord[],
  ): Promise<Appended | 'conflict'> {
    const records = calls === undefined ? undefined : { records: calls, kept: this.#callIdsKept };
    const reply = await this.#guard(() =>
      this.#commands.appendMessages(sessionId, { meta, version: expectedVersion, messages, calls: records }),
    );
    const outcome = scriptOutcome(reply);
    if ('refusal' in outcome) {
      if (outcome.refusal === 'version_changed') return 'conflict';
      throw new CtxflowError('state_session_not_found', 'session not found');
    }
    const [start, version, previous] = outcome.ok as [number, string, string];
    return {
      entries: messages.map((message, i) => ({ ...structuredClone(message), seq: start + i }) as MessageEntry),
      written: { version, previous },
    };
  }

  async commitStep(sessionId: string, commit: StepCommit): Promise<CommitResult> {
    const { step, meta } = commit;
    const promptId = this.#prompts.idOf(step.system);
    // Only the counters changed since the version the commit names: they alone are written.
    const counters =
      commit.countersOnly === true &&
      commit.expectedVersion !== undefined &&
      commit.expectedVersion !== '' &&
      meta.lastStepAt !== undefined &&
      meta.lastRequestEnd !== undefined
        ? {
            steps: meta.steps,
            lastStepAt: meta.lastStepAt,
            lastRequestEnd: meta.lastRequestEnd,
            logFold: meta.logFold,
          }
        : undefined;
    const args = (withText: boolean): CommitStepArgs => ({
      logLength: commit.expectedLogLength,
      version: commit.expectedVersion,
      step: storedStep(step, promptId),
      meta: counters === undefined ? { whole: meta } : { counters },
      prompt: promptId === '' ? undefined : { id: promptId, text: withText ? step.system : undefined },
      wholeQueue: commit.wholeQueue === true,
      nonce: versionNonce(),
      drain: commit.drain,
      rows: commit.rows,
      outboxRows,
    });
    // The prompt's text only when the session's last commit did not store or use it.
    const known = promptId !== '' && this.#sessionPrompts.get(sessionId) === promptId;
    // The outbox takes every row (events) or the rows that carry ticket updates (receipts).
    const taken = commit.rows.length > 0 ? this.#outbox?.rowsOf(commit.rows) : undefined;
    const outbox = taken === 'all' || (taken !== undefined && taken.length > 0) ? this.#outbox : undefined;
    const outboxRows = outbox && Array.isArray(taken) ? taken : undefined;
    const markedAt = outbox ? await outbox.mark(meta.tenant, sessionId) : 0;
    const outboxKey = outbox?.streamKey(sessionId);
    const run = (withText: boolean) =>
      this.#guard(() => this.#commands.commitStep(sessionId, args(withText), outboxKey));
    let outcome = scriptOutcome(await run(!known));
    if ('refusal' in outcome && outcome.refusal === 'prompt_unknown') outcome = scriptOutcome(await run(true));
    if ('refusal' in outcome) return { outcome: 'conflict' };
    if (outbox && typeof outcome.ok !== 'string') await outbox.committed(meta.tenant, sessionId, markedAt);
    if (typeof outcome.ok === 'string') {
      return { outcome: 'duplicate', step: (await this.#stepRecords(sessionId, [outcome.ok]))[0]! };
    }
    if (promptId !== '') this.#sessionPrompts.set(sessionId, promptId);
    if (step.requestId !== undefined && meta.steps % REQUEST_TRIM_EVERY === 0) await this.#trimRequests(sessionId);
    return { outcome: 'committed', version: String((outcome.ok as string[])[0]) };
  }

  /** Deletes the session's request-id records past the retention; a failure waits for the next trim. */
  async #trimRequests(sessionId: string): Promise<void> {
    const keys = this.#keys.session(sessionId);
    await this.#commands.trimRequests(keys.requests, keys.steps, this.#requestIdsKept).catch(() => {});
  }

  async rewind(sessionId: string, commit: RewindCommit): Promise<boolean> {
    const reply = await this.#guard(() =>
      this.#commands.rewind(sessionId, {
        logLength: commit.expectedLogLength,
        toLength: commit.toLength,
        meta: commit.meta,
        requeue: commit.requeue,
        dropItems: commit.dropItems,
        dropCalls: commit.dropCalls,
        dropSteps: commit.dropSteps,
      }),
    );
    return !('refusal' in scriptOutcome(reply));
  }

  async putCall(sessionId: string, call: CallRecord): Promise<Written | undefined> {
    // An absent session records nothing (as the in-memory store).
    const outcome = scriptOutcome(await this.#guard(() => this.#commands.putCall(sessionId, call, this.#callIdsKept)));
    if ('refusal' in outcome) return undefined;
    const [version, previous] = outcome.ok as [string, string];
    return { version, previous };
  }

  // ---------------------------------------------------------------- steps

  async getStep(sessionId: string, ref: StepRef): Promise<StepRecord | undefined> {
    const keys = this.#keys.session(sessionId);
    if (ref.stepId === undefined && ref.requestId === undefined && ref.ordinal !== undefined) {
      const ordinal = ref.ordinal;
      const found = await this.#guard(() => this.#commands.stepAt(keys.steps, ordinal));
      return found === null ? undefined : (await this.#stepRecords(sessionId, [found]))[0];
    }
    let stepId = ref.stepId;
    if (stepId === undefined && ref.requestId !== undefined) {
      const requestId = ref.requestId;
      stepId = (await this.#guard(() => this.#client.hget(keys.requests, requestId))) ?? undefined;
    }
    if (stepId === undefined) return undefined;
    const id = stepId;
    const json = await this.#guard(() => this.#client.hget(keys.steps, id));
    return json === null ? undefined : (await this.#stepRecords(sessionId, [json]))[0];
  }

  async listSteps(sessionId: string): Promise<StepRecord[]> {
    const values = await this.#guard(() => this.#client.hvals(this.#keys.session(sessionId).steps));
    return (await this.#stepRecords(sessionId, values)).sort((a, b) => a.ordinal - b.ordinal);
  }

  // ---------------------------------------------------------------- system prompts of step records

  /** Estimated bytes the prompt caches hold now: text -> id and id -> text. */
  get promptCacheBytes(): { ids: number; texts: number } {
    return this.#prompts.bytes;
  }

  /** Step records from their stored JSON, with their prompts' texts (redis/prompt-texts.ts). */
  #stepRecords(sessionId: string, jsons: string[]): Promise<StepRecord[]> {
    return this.#prompts.stepRecords(sessionId, jsons, (ids) =>
      this.#guard(() => this.#client.hmget(this.#keys.session(sessionId).prompts, ...ids)),
    );
  }

  // ---------------------------------------------------------------- plumbing

  async #guard<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (cause) {
      throw this.#wrap(cause);
    }
  }

  #wrap(cause: unknown): unknown {
    if (unavailable(cause)) return new CtxflowError('store_unavailable', 'the session store did not answer', { cause });
    return cause;
  }
}
