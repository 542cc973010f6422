import { hash, randomFillSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
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
  Written,
} from '../ports/session-store.ts';
import { type StoreKeys, storeKeys } from './redis/keys.ts';
import { REQUEST_TRIM_EVERY, requestIdsKeptOf } from './request-retention.ts';

function lua(file: string): string {
  return readFileSync(new URL(`./redis/${file}`, import.meta.url), 'utf8');
}

/**
 * Every session script takes the ten session keys (keys.ts SESSION_KEY_ORDER) and
 * writes the session's next version through nextVersion() (next-version.lua, prepended);
 * its first ARGV is the retention, and every key it leaves gets that TTL (session-ttl.lua).
 */
const SESSION_SCRIPTS = {
  ctxCreateSession: 'create-session.lua',
  ctxEnqueue: 'enqueue.lua',
  ctxAppendMessages: 'append-messages.lua',
  ctxCommitStep: 'commit-step.lua',
  ctxRewind: 'rewind.lua',
  ctxPutMeta: 'put-meta.lua',
  ctxPutCall: 'put-call.lua',
} as const;
const SESSION_KEY_COUNT = 10;
const NEXT_VERSION = lua('next-version.lua');
const SESSION_TTL = lua('session-ttl.lua');

/** A session script: the preludes, then its own text run as script() (session-ttl.lua). */
function sessionScript(file: string): string {
  return `${NEXT_VERSION}\n${SESSION_TTL}\nlocal function script()\n${lua(file)}\nend\nreturn expireSession(script())\n`;
}

type ScriptName = keyof typeof SESSION_SCRIPTS | 'ctxReplaceAgent';
/** Read-only scripts (each header says its keys). */
type ReadScripts = {
  ctxKeyFingerprint: (meta: string, keys: string, key: string) => Promise<string | null>;
  ctxLoadSession: (...args: string[]) => Promise<LoadReply | null>;
  ctxTrimRequests: (requests: string, steps: string, keep: string) => Promise<number>;
};
/** load-session.lua's reply: meta, from, log, queue, calls (flat), sites, seq fields, request ids. */
type LoadReply = [string, number, string[], string[], string[], string[], (string | null)[], string[]];
/** An integer, a string, or an array (see each script's header). */
type ScriptReply = number | string | (number | string)[];
type ScriptClient = Record<ScriptName, (...args: (string | number)[]) => Promise<ScriptReply>>;

/** The refusals the scripts answer with (see each script's header). */
export type StoreRefusal =
  | 'session_not_found'
  | 'session_exists'
  | 'replayed'
  | 'key_conflict'
  | 'log_changed'
  | 'item_not_queued'
  | 'version_changed'
  | 'bad_range'
  | 'prompt_unknown';

const REFUSALS: Record<number, StoreRefusal> = {
  [-1]: 'session_not_found',
  [-2]: 'session_exists',
  [-3]: 'replayed',
  [-4]: 'key_conflict',
  [-5]: 'log_changed',
  [-6]: 'item_not_queued',
  [-7]: 'version_changed',
  [-8]: 'bad_range',
  [-9]: 'prompt_unknown',
};

/**
 * THE mapping of a script's reply: a negative integer is a refusal (nothing was
 * written); anything else is the script's answer. An unknown code is a bug.
 */
export function scriptOutcome(reply: ScriptReply): { refusal: StoreRefusal } | { ok: ScriptReply } {
  if (typeof reply === 'number' && reply < 0) {
    const refusal = REFUSALS[reply];
    if (!refusal) throw new Error(`session store script answered an unknown code ${reply}`);
    return { refusal };
  }
  return { ok: reply };
}

/** Reply errors of a server that is up but cannot serve now; anything else from Redis is a bug. */
const TRANSIENT_REPLY = /^(LOADING|BUSY|TRYAGAIN|CLUSTERDOWN|MASTERDOWN|READONLY|NOREPLICAS|MOVED|ASK)\b/;

function unavailable(cause: unknown): boolean {
  if (!(cause instanceof Error)) return true;
  if (cause.name === 'ReplyError') return TRANSIENT_REPLY.test(cause.message);
  return true;
}

/** JSON of a queued item with `itemId` as its LAST property: the scripts read it at the element's end. */
function encodeQueued(item: QueuedItem): string {
  const { itemId, ...rest } = item;
  return JSON.stringify({ ...rest, itemId });
}

function parse<T>(json: string): T {
  return JSON.parse(json) as T;
}

/** Random bytes for version nonces, drawn 8 at a time (one random fill per 512 commits). */
const noncePool = Buffer.alloc(4096);
let nonceOffset = noncePool.length;

/** 16 random hex digits: the second part of the version a step commit issues (commit-step.lua). */
function versionNonce(): string {
  if (nonceOffset + 8 > noncePool.length) {
    randomFillSync(noncePool);
    nonceOffset = 0;
  }
  nonceOffset += 8;
  return noncePool.toString('hex', nonceOffset - 8, nonceOffset);
}

/** The `seq` fields of the meta's counters a step commit writes apart (commit-step.lua). */
const COUNTERS = ['steps', 'stepAt', 'requestEnd'] as const;

/** The meta as stored: its JSON, with the counters `seq` holds (values of COUNTERS) over it. */
function storedMeta(json: string, counters: (string | null | undefined)[]): SessionMeta {
  const meta = parse<SessionMeta>(json);
  const [steps, stepAt, requestEnd] = counters;
  if (steps !== null && steps !== undefined) meta.steps = Number(steps);
  if (stepAt !== null && stepAt !== undefined) meta.lastStepAt = Number(stepAt);
  if (requestEnd !== null && requestEnd !== undefined) meta.lastRequestEnd = Number(requestEnd);
  return meta;
}

/** A step record as stored: its system prompt by id in the session's `prompts` hash (keys.ts). */
type StoredStep = Omit<StepRecord, 'system'> & { system?: string; systemRef?: string };

/** The stored JSON of a step record whose system prompt has id `promptId` ('' keeps the text in it). */
function encodeStep(step: StepRecord, promptId: string): string {
  if (promptId === '') return JSON.stringify(step);
  const { system: _, ...rest } = step;
  return JSON.stringify({ ...rest, systemRef: promptId });
}

/** The calls hash as HGETALL's flat field, value list; a value is `<order> <CallRecord JSON>` (put-call.lua). */
function parseCalls(flat: readonly string[]): CallRecord[] {
  const values: string[] = [];
  for (let i = 1; i < flat.length; i += 2) values.push(flat[i]!);
  return values
    .map((value) => {
      const space = value.indexOf(' ');
      return { order: Number(value.slice(0, space)), call: parse<CallRecord>(value.slice(space + 1)) };
    })
    .sort((a, b) => a.order - b.order)
    .map((entry) => entry.call);
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
  /**
   * Retention in ms (CTXFLOW_SESSION_TTL_MS): every write gives all of the session's keys
   * this TTL, so an idle session expires whole. 0 (default): kept until deleted.
   */
  ttlMs?: number;
}

/** Session ids read from a tenant's index at once. */
const INDEX_PAGE = 200;

/** Default bound of each prompt cache: 16 MiB (the session-runner's heap budget in docs/operations.md). */
export const DEFAULT_PROMPT_CACHE_BYTES = 16 * 1024 * 1024;
/** Most prompts each prompt cache holds, whatever their size. */
const PROMPT_CACHE_ENTRIES = 1_000;

/**
 * Estimated heap bytes of a prompt cache entry: both strings at 2 bytes per
 * UTF-16 unit (V8's two-byte strings; one-byte ones take half) plus the
 * cache's own per-entry bookkeeping.
 */
export function promptEntryBytes(key: string, value: string): number {
  return 2 * (key.length + value.length) + 64;
}

const promptCache = (maxSize: number) =>
  new LRUCache<string, string>({
    max: PROMPT_CACHE_ENTRIES,
    maxSize,
    sizeCalculation: (value, key) => promptEntryBytes(key, value),
  });

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
 */
export class RedisSessionStore implements SessionStore {
  readonly #client: Redis | Cluster;
  readonly #scripts: ScriptClient;
  readonly #reads: ReadScripts;
  /** Request-id records a session keeps (trim-requests.lua). */
  readonly #requestIdsKept: string;
  readonly #keys: StoreKeys;
  /** The retention every session script gets as its first argument (session-ttl.lua). */
  readonly #ttl: string;
  /** System prompt text -> its id (a hash of the text), and back: step records name prompts by id. */
  readonly #promptIds: LRUCache<string, string>;
  readonly #promptTexts: LRUCache<string, string>;
  /**
   * sessionId -> the id of the prompt its `seq` names (the last commit stored or used it):
   * a commit of that prompt sends its id alone. Only a hint: the commit script checks it.
   */
  readonly #sessionPrompts = new LRUCache<string, string>({ max: 10_000 });

  constructor(client: Redis | Cluster, options: RedisSessionStoreOptions = {}) {
    this.#keys = storeKeys(options.prefix);
    const promptBytes = options.promptCacheBytes ?? DEFAULT_PROMPT_CACHE_BYTES;
    this.#promptIds = promptCache(promptBytes);
    this.#promptTexts = promptCache(promptBytes);
    this.#requestIdsKept = String(requestIdsKeptOf(options.requestIdsKept));
    const ttlMs = options.ttlMs ?? 0;
    if (!Number.isSafeInteger(ttlMs) || ttlMs < 0) throw new Error(`ttlMs ${ttlMs} is not a non-negative integer`);
    this.#ttl = String(ttlMs);
    // defineCommand sends EVALSHA and falls back to EVAL on NOSCRIPT (a restarted Redis).
    const scripts = client as unknown as Partial<ScriptClient>;
    for (const [name, file] of Object.entries(SESSION_SCRIPTS)) {
      if (typeof scripts[name as ScriptName] !== 'function') {
        client.defineCommand(name, { numberOfKeys: SESSION_KEY_COUNT, lua: sessionScript(file) });
      }
    }
    if (typeof scripts.ctxReplaceAgent !== 'function') {
      client.defineCommand('ctxReplaceAgent', { numberOfKeys: 1, lua: lua('replace-agent.lua') });
    }
    if (typeof (client as unknown as Partial<ReadScripts>).ctxKeyFingerprint !== 'function') {
      client.defineCommand('ctxKeyFingerprint', { numberOfKeys: 2, lua: lua('key-fingerprint.lua') });
    }
    if (typeof (client as unknown as Partial<ReadScripts>).ctxTrimRequests !== 'function') {
      client.defineCommand('ctxTrimRequests', { numberOfKeys: 2, lua: lua('trim-requests.lua') });
    }
    if (typeof (client as unknown as Partial<ReadScripts>).ctxLoadSession !== 'function') {
      client.defineCommand('ctxLoadSession', { numberOfKeys: SESSION_KEY_COUNT, lua: lua('load-session.lua') });
    }
    this.#client = client;
    this.#scripts = client as unknown as ScriptClient;
    this.#reads = client as unknown as ReadScripts;
  }

  // ---------------------------------------------------------------- agents

  async putAgent(agent: AgentRecord): Promise<void> {
    const key = this.#keys.agent(agent.agentId);
    await this.#guard(() => this.#client.hset(key, 'record', JSON.stringify(agent), 'version', String(agent.version)));
  }

  async replaceAgent(agent: AgentRecord, expectedVersion: number): Promise<boolean> {
    const reply = await this.#guard(() =>
      this.#scripts.ctxReplaceAgent(
        this.#keys.agent(agent.agentId),
        String(expectedVersion),
        String(agent.version),
        JSON.stringify(agent),
      ),
    );
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
    const sites = carry?.sites ?? [];
    const prompts = new Map<string, string>();
    const stored = steps.map((step) => {
      const promptId = this.#promptId(step.system);
      if (promptId !== '') prompts.set(promptId, step.system);
      return encodeStep(step, promptId);
    });
    const args: string[] = [
      JSON.stringify(meta),
      String(log.length),
      String(steps.length),
      String(calls.length),
      String(sites.length),
      String(carry?.itemSeq ?? 0),
      String(prompts.size),
    ];
    for (const entry of log) args.push(JSON.stringify(entry));
    for (const [i, step] of steps.entries()) args.push(step.stepId, step.requestId ?? '', stored[i]!);
    for (const call of calls) args.push(call.callId, JSON.stringify(call));
    args.push(...sites);
    for (const [promptId, text] of prompts) args.push(promptId, text);
    const reply = await this.#session('ctxCreateSession', meta.sessionId, args);
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

  /** The meta with its counters (one MULTI: the meta and `seq` are read together). */
  async #readMeta(sessionId: string): Promise<SessionMeta | undefined> {
    const keys = this.#keys.session(sessionId);
    const replies = await this.#guard(() =>
      this.#client
        .multi()
        .get(keys.meta)
        .hmget(keys.seq, ...COUNTERS)
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
      this.#reads.ctxLoadSession(
        ...this.#keys.sessionList(sessionId),
        options.window ? 'window' : 'whole',
        'item',
        'version',
        'prompt',
        ...COUNTERS,
      ),
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
    await this.#guard(() => this.#client.del(...this.#keys.sessionList(sessionId)));
    if (meta !== undefined)
      await this.#guard(() => this.#client.zrem(this.#keys.tenantSessions(meta.tenant), sessionId));
    this.#sessionPrompts.set(sessionId, ''); // a hint only: the next commit sends its prompt's text
  }

  async putMeta(meta: SessionMeta): Promise<boolean> {
    const reply = await this.#session('ctxPutMeta', meta.sessionId, [JSON.stringify(meta)]);
    return !('refusal' in scriptOutcome(reply));
  }

  // ---------------------------------------------------------------- writes of the engine

  async enqueue(sessionId: string, items: NewQueuedItem[], dedupe?: EnqueueDedupe): Promise<EnqueueResult> {
    const head =
      dedupe === undefined
        ? ['none', '', '']
        : dedupe.type === 'key'
          ? ['key', dedupe.key, dedupe.fingerprint]
          : ['site', `${dedupe.callId}|${dedupe.site}`, ''];
    const reply = await this.#session('ctxEnqueue', sessionId, [...head, ...items.map((item) => JSON.stringify(item))]);
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
      items: items.map((item, i) => ({ ...structuredClone(item), itemId: `itm_${first + i}` })),
      written: { version, previous },
    };
  }

  async keyFingerprint(sessionId: string, key: string): Promise<string | undefined> {
    const keys = this.#keys.session(sessionId);
    const reply = await this.#guard(() => this.#reads.ctxKeyFingerprint(keys.meta, keys.keys, key));
    return reply ?? undefined;
  }

  appendMessages(sessionId: string, messages: NewMessage[], meta?: SessionMeta): Promise<Appended>;
  appendMessages(
    sessionId: string,
    messages: NewMessage[],
    meta: SessionMeta | undefined,
    expectedVersion: string,
  ): Promise<Appended | 'conflict'>;
  async appendMessages(
    sessionId: string,
    messages: NewMessage[],
    meta?: SessionMeta,
    expectedVersion?: string,
  ): Promise<Appended | 'conflict'> {
    const reply = await this.#session('ctxAppendMessages', sessionId, [
      meta === undefined ? '' : JSON.stringify(meta),
      expectedVersion ?? '-',
      ...messages.map((message) => JSON.stringify(message)),
    ]);
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
    const promptId = this.#promptId(step.system);
    // Only the counters changed since the version the commit names: they alone are written.
    const countersOnly =
      commit.countersOnly === true &&
      commit.expectedVersion !== undefined &&
      commit.expectedVersion !== '' &&
      meta.lastStepAt !== undefined &&
      meta.lastRequestEnd !== undefined;
    const args = [
      String(commit.expectedLogLength),
      step.stepId,
      encodeStep(step, promptId),
      step.requestId ?? '',
      countersOnly ? '' : JSON.stringify(meta),
      commit.expectedVersion ?? '-',
      String(commit.drain.length),
      promptId,
      // The prompt's text only when the session's last commit did not store or use it.
      promptId !== '' && this.#sessionPrompts.get(sessionId) === promptId ? '' : step.system,
      String(meta.steps),
      String(meta.lastStepAt ?? ''),
      String(meta.lastRequestEnd ?? ''),
      commit.wholeQueue === true ? 'all' : '',
      versionNonce(),
      ...commit.drain,
      ...commit.rows.map((row) => JSON.stringify(row)),
    ];
    let outcome = scriptOutcome(await this.#session('ctxCommitStep', sessionId, args));
    if ('refusal' in outcome && outcome.refusal === 'prompt_unknown') {
      args[8] = step.system;
      outcome = scriptOutcome(await this.#session('ctxCommitStep', sessionId, args));
    }
    if ('refusal' in outcome) return { outcome: 'conflict' };
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
    await this.#reads.ctxTrimRequests(keys.requests, keys.steps, this.#requestIdsKept).catch(() => {});
  }

  async rewind(sessionId: string, commit: RewindCommit): Promise<boolean> {
    const reply = await this.#session('ctxRewind', sessionId, [
      String(commit.expectedLogLength),
      String(commit.toLength),
      JSON.stringify(commit.meta),
      String(commit.requeue.length),
      String(commit.dropItems.length),
      String(commit.dropCalls.length),
      String(commit.dropSteps.length),
      ...commit.requeue.map(encodeQueued),
      ...commit.dropItems,
      ...commit.dropCalls,
      ...commit.dropSteps,
    ]);
    return !('refusal' in scriptOutcome(reply));
  }

  async putCall(sessionId: string, call: CallRecord): Promise<Written | undefined> {
    // An absent session records nothing (as the in-memory store).
    const outcome = scriptOutcome(await this.#session('ctxPutCall', sessionId, [call.callId, JSON.stringify(call)]));
    if ('refusal' in outcome) return undefined;
    const [version, previous] = outcome.ok as [string, string];
    return { version, previous };
  }

  // ---------------------------------------------------------------- steps

  async getStep(sessionId: string, ref: { stepId?: string; requestId?: string }): Promise<StepRecord | undefined> {
    const keys = this.#keys.session(sessionId);
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
    return { ids: this.#promptIds.calculatedSize, texts: this.#promptTexts.calculatedSize };
  }

  /** The id of a system prompt: a hash of its text ('' for none, kept in the record). */
  #promptId(text: string): string {
    if (text === '') return '';
    let id = this.#promptIds.get(text);
    if (id === undefined) {
      id = hash('sha256', text, 'base64url').slice(0, 22);
      this.#promptIds.set(text, id);
      this.#promptTexts.set(id, text);
    }
    return id;
  }

  /**
   * Step records from their stored JSON, each with its system prompt's text: a record
   * written before prompts were stored apart has it in itself; the texts this process
   * does not know are read from the session's `prompts` in one call.
   */
  async #stepRecords(sessionId: string, jsons: string[]): Promise<StepRecord[]> {
    const stored = jsons.map((json) => parse<StoredStep>(json));
    const texts = new Map<string, string>();
    const missing: string[] = [];
    for (const step of stored) {
      const ref = step.systemRef;
      if (ref === undefined || texts.has(ref) || missing.includes(ref)) continue;
      const known = this.#promptTexts.get(ref);
      if (known === undefined) missing.push(ref);
      else texts.set(ref, known);
    }
    if (missing.length > 0) {
      const read = await this.#guard(() => this.#client.hmget(this.#keys.session(sessionId).prompts, ...missing));
      missing.forEach((ref, i) => {
        const text = read[i];
        if (text === null || text === undefined) {
          throw new Error(`session ${sessionId}: a step record names prompt ${ref}, which is not stored`);
        }
        texts.set(ref, text);
        this.#promptTexts.set(ref, text);
      });
    }
    return stored.map((step) => {
      if (step.systemRef === undefined) return step as StepRecord;
      const { systemRef, ...rest } = step;
      return { ...rest, system: texts.get(systemRef)! };
    });
  }

  // ---------------------------------------------------------------- plumbing

  #session(name: keyof typeof SESSION_SCRIPTS, sessionId: string, args: string[]): Promise<ScriptReply> {
    const keys = this.#keys.sessionList(sessionId);
    return this.#guard(() => this.#scripts[name](...keys, this.#ttl, ...args));
  }

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
