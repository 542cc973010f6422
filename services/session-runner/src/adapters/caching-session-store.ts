import { getHeapStatistics } from 'node:v8';
import { LRUCache } from 'lru-cache';
import type { LogView } from '../domain/log-view.ts';
import type {
  AgentRecord,
  CallRecord,
  LogEntry,
  NewQueuedItem,
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
import type { ReplayedKey, StoreCache } from '../ports/store-cache.ts';
import { SessionCache } from './session-cache.ts';

export const DEFAULT_HELD_SESSIONS = 1_000;

/**
 * The share of V8's heap limit that held session states take by default: a fourteenth of
 * `heap_size_limit` (old and young generations), 30.9 MiB under the manifests'
 * `--max-old-space-size=384 --max-semi-space-size=16` (a 432 MiB limit), so the budget
 * follows the heap cap a deployment sets. Under steps that return whole requests (a GiB of
 * answers a minute), V8 keeps a heap well above the live data; with a seventh, the runner's
 * RSS passed 450 MiB of its 512Mi limit (docs/performance.md, the soak).
 */
export const HELD_HEAP_SHARE = 1 / 14;

/** The default budget of held session states: HELD_HEAP_SHARE of `heapLimit` (default: this process's). */
export function defaultHeldBytes(heapLimit = getHeapStatistics().heap_size_limit): number {
  return Math.floor(heapLimit * HELD_HEAP_SHARE);
}

export interface CachingSessionStoreOptions {
  /** Sessions whose state this runner holds between steps (session-cache.ts); default 1,000, 0 for none. */
  heldSessions?: number;
  /** Estimated heap bytes of held session states at most (session-cache.ts); default defaultHeldBytes(). */
  heldBytes?: number;
  /** Call records a held state keeps (CTXFLOW_CALL_IDS_KEPT, as the store); default DEFAULT_CALL_IDS_KEPT. */
  callIdsKept?: number;
}

/**
 * A SessionStore decorated with what this runner keeps in memory (ports/store-cache.ts):
 * the tenant and agent of sessions, agents as last read, request keys seen replayed, and
 * the session states held between steps (session-cache.ts). Every method of the store
 * passes through; each write updates or drops what is held of its session, so a held
 * state is the store's as of its version (a commit on it names that version).
 */
export class CachingSessionStore implements SessionStore, StoreCache {
  readonly #store: SessionStore;
  readonly #held: SessionCache;
  /** sessionId -> tenant, immutable once created; least recently used first out. */
  readonly #owners = new LRUCache<string, string>({ max: 10_000 });
  /** sessionId -> agentId, immutable once created. */
  readonly #agentIds = new LRUCache<string, string>({ max: 10_000 });
  /** agentId -> the agent as last read. */
  readonly #agents = new LRUCache<string, AgentRecord>({ max: 1_000 });
  /**
   * `<sessionId length>:<sessionId><key>` -> the items a request key was last replayed
   * with, as received. A key's stored fingerprint never changes, so the same raw items
   * again are a replay once the store confirms the fingerprint.
   */
  readonly #replayedKeys = new LRUCache<string, ReplayedKey>({ max: 1_000 });

  constructor(store: SessionStore, options: CachingSessionStoreOptions = {}) {
    this.#store = store;
    this.#held = new SessionCache({
      sessions: options.heldSessions ?? DEFAULT_HELD_SESSIONS,
      bytes: options.heldBytes ?? defaultHeldBytes(),
      ...(options.callIdsKept === undefined ? {} : { callIdsKept: options.callIdsKept }),
    });
  }

  // ---------------------------------------------------------------- what is kept

  tenantOf(sessionId: string): string | Promise<string | undefined> {
    return this.#owners.get(sessionId) ?? this.#readTenant(sessionId);
  }

  async #readTenant(sessionId: string): Promise<string | undefined> {
    const owner = (await this.#store.getMeta(sessionId))?.tenant;
    if (owner !== undefined) this.#owners.set(sessionId, owner);
    return owner;
  }

  agentIdOf(sessionId: string): string | undefined {
    return this.#agentIds.get(sessionId);
  }

  knownAgent(agentId: string): AgentRecord | undefined {
    return this.#agents.get(agentId);
  }

  held(sessionId: string): SessionState | undefined {
    return this.#held.get(sessionId);
  }

  heldView(sessionId: string): LogView | undefined {
    return this.#held.view(sessionId);
  }

  hold(sessionId: string, state: SessionState, view?: LogView): void {
    this.#held.hold(sessionId, state, view);
  }

  /** Estimated bytes of the held session states. */
  get heldBytes(): number {
    return this.#held.bytes;
  }

  replayedKey(sessionId: string, key: string): ReplayedKey | undefined {
    return this.#replayedKeys.get(`${sessionId.length}:${sessionId}${key}`);
  }

  keyReplayed(sessionId: string, key: string, replayed: ReplayedKey): void {
    this.#replayedKeys.set(`${sessionId.length}:${sessionId}${key}`, replayed);
  }

  // ---------------------------------------------------------------- agents

  putAgent(agent: AgentRecord): Promise<void> {
    return this.#store.putAgent(agent);
  }

  replaceAgent(agent: AgentRecord, expectedVersion: number): Promise<boolean> {
    return this.#store.replaceAgent(agent, expectedVersion);
  }

  async getAgent(agentId: string): Promise<AgentRecord | undefined> {
    const agent = await this.#store.getAgent(agentId);
    if (agent) this.#agents.set(agentId, agent);
    return agent;
  }

  async deleteAgent(agentId: string): Promise<void> {
    this.#agents.delete(agentId);
    await this.#store.deleteAgent(agentId);
  }

  // ---------------------------------------------------------------- sessions

  /** A session this runner creates is held at once when the budget has room: its first step reads nothing. */
  async createSession(
    meta: SessionMeta,
    log: LogEntry[],
    steps: StepRecord[],
    calls: CallRecord[],
    carry?: SessionCarry,
  ): Promise<string> {
    const version = await this.#store.createSession(meta, log, steps, calls, carry);
    this.#owners.set(meta.sessionId, meta.tenant);
    if (meta.agentId !== undefined) this.#agentIds.set(meta.sessionId, meta.agentId);
    this.#held.hold(meta.sessionId, {
      meta: structuredClone(meta),
      log,
      queue: [],
      calls,
      sites: carry?.sites ?? [],
      itemSeq: carry?.itemSeq ?? 0,
      requestIds: steps.flatMap((s) => (s.requestId === undefined ? [] : [s.requestId])),
      version,
    });
    return version;
  }

  getMeta(sessionId: string): Promise<SessionMeta | undefined> {
    return this.#store.getMeta(sessionId);
  }

  async load(sessionId: string, options?: LoadOptions): Promise<SessionState | undefined> {
    const state = await this.#store.load(sessionId, options);
    if (state?.meta.agentId !== undefined) this.#agentIds.set(sessionId, state.meta.agentId);
    return state;
  }

  listSessions(tenant: string, limit: number): Promise<SessionMeta[]> {
    return this.#store.listSessions(tenant, limit);
  }

  sessionsOfAgent(tenant: string, agentId: string): Promise<string[]> {
    return this.#store.sessionsOfAgent(tenant, agentId);
  }

  /** What is kept of the session goes with it, before and after the erasure. */
  async deleteSession(sessionId: string): Promise<void> {
    this.#forget(sessionId);
    await this.#store.deleteSession(sessionId);
    this.#forget(sessionId);
  }

  #forget(sessionId: string): void {
    this.#held.drop(sessionId);
    this.#owners.delete(sessionId);
    this.#agentIds.delete(sessionId);
  }

  /** A thread context edit: the held state is dropped (the next pass reads the store). */
  putMeta(meta: SessionMeta): Promise<boolean> {
    this.#held.drop(meta.sessionId);
    return this.#store.putMeta(meta);
  }

  // ---------------------------------------------------------------- writes the held state follows

  /** The held state gets the queued items and the call site that recorded them. */
  async enqueue(sessionId: string, items: NewQueuedItem[], dedupe?: EnqueueDedupe): Promise<EnqueueResult> {
    const result = await this.#store.enqueue(sessionId, items, dedupe);
    if (result.outcome === 'not_found') this.#held.drop(sessionId);
    if (result.outcome !== 'recorded') return result;
    const site = dedupe?.type === 'site' ? `${dedupe.callId}|${dedupe.site}` : undefined;
    this.#held.follow(sessionId, result.written, (held) => ({
      ...held,
      queue: [...held.queue, ...result.items],
      sites: site === undefined ? held.sites : [...held.sites, site],
      itemSeq: result.items.reduce((last, q) => Math.max(last, Number(q.itemId.slice('itm_'.length))), held.itemSeq),
    }));
    return result;
  }

  keyFingerprint(sessionId: string, key: string): Promise<string | undefined> {
    return this.#store.keyFingerprint(sessionId, key);
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
    calls: readonly CallRecord[] = [],
  ): Promise<Appended | 'conflict'> {
    const appended =
      expectedVersion === undefined
        ? await this.#store.appendMessages(sessionId, messages, meta)
        : await this.#store.appendMessages(sessionId, messages, meta, expectedVersion, calls);
    if (appended === 'conflict') {
      this.#held.drop(sessionId);
      return appended;
    }
    const { entries, written } = appended;
    this.#held.follow(
      sessionId,
      written,
      (held) => ({
        ...held,
        meta: meta === undefined ? held.meta : structuredClone(meta),
        calls: calls.reduce(withCall, held.calls),
      }),
      entries,
    );
    return appended;
  }

  /**
   * A step commit. Refused (another write came between the read or the held state and
   * the commit): the held state is dropped. Committed: the pass holds the state it made.
   */
  async commitStep(sessionId: string, commit: StepCommit): Promise<CommitResult> {
    const result = await this.#store.commitStep(sessionId, commit);
    if (result.outcome !== 'committed') this.#held.drop(sessionId);
    return result;
  }

  /** A rewind: the held state is dropped first (the next pass reads what is left). */
  rewind(sessionId: string, commit: RewindCommit): Promise<boolean> {
    this.#held.drop(sessionId);
    return this.#store.rewind(sessionId, commit);
  }

  async putCall(sessionId: string, call: CallRecord): Promise<Written | undefined> {
    const written = await this.#store.putCall(sessionId, call);
    if (!written) {
      this.#held.drop(sessionId);
      return written;
    }
    this.#held.follow(sessionId, written, (held) => ({ ...held, calls: withCall(held.calls, call) }));
    return written;
  }

  getStep(sessionId: string, ref: StepRef): Promise<StepRecord | undefined> {
    return this.#store.getStep(sessionId, ref);
  }

  listSteps(sessionId: string): Promise<StepRecord[]> {
    return this.#store.listSteps(sessionId);
  }
}

/** The held calls after a call record's write: a replaced call keeps its place, a new one goes last. */
function withCall(calls: CallRecord[], call: CallRecord): CallRecord[] {
  const at = calls.findIndex((c) => c.callId === call.callId);
  return at < 0 ? [...calls, structuredClone(call)] : calls.with(at, structuredClone(call));
}
