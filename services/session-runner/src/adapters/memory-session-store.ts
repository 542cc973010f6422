import { CtxflowError } from '@ctxflow/contracts';
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
import { type Clock, systemClock } from '../ports/clock.ts';
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
import { IdleSlots } from './idle-slots.ts';
import type { MemoryRowOutbox } from './memory-row-outbox.ts';
import { callIdsKeptOf, requestIdsKeptOf, requestKeysKeptOf } from './request-retention.ts';

interface SessionSlot {
  meta: SessionMeta;
  log: LogEntry[];
  queue: QueuedItem[];
  calls: Map<string, CallRecord>;
  keys: Map<string, string>;
  sites: Set<string>;
  steps: Map<string, StepRecord>;
  requests: Map<string, string>;
  nextItem: number;
  /** The write count, as SessionState.version. */
  writes: number;
  /** Clock time of the last write (retention). */
  touched: number;
}

export interface MemorySessionStoreOptions {
  /** Retention in ms (CTXFLOW_SESSION_TTL_MS): a session no write touched for this long is gone. 0 (default): kept. */
  ttlMs?: number;
  clock?: Clock;
  /** The row outbox (events and receipts): a commit's rows it takes go there, in the same write. */
  outbox?: MemoryRowOutbox;
  /** Request-id records a session keeps (request-retention.ts); default DEFAULT_REQUEST_IDS_KEPT. */
  requestIdsKept?: number;
  /** Call records a session keeps, with their call sites (request-retention.ts); default DEFAULT_CALL_IDS_KEPT. */
  callIdsKept?: number;
  /** App request keys a session keeps (request-retention.ts); default DEFAULT_REQUEST_KEYS_KEPT. */
  requestKeysKept?: number;
}

/**
 * A deep copy of stored data. Every value here is JSON (the Redis adapter stores the
 * same values as JSON), and a JSON round trip is faster than structuredClone for it.
 */
function copy<T>(value: T): T {
  return value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T);
}

/** Counts a write of the slot: its versions before and after. */
function written(slot: SessionSlot): Written {
  slot.writes += 1;
  return { version: String(slot.writes), previous: String(slot.writes - 1) };
}

/**
 * The embedded default store. Every method runs without an await between its
 * checks and its writes, so each is atomic; values are copied in and out so a
 * caller can never change stored state by reference.
 */
export class MemorySessionStore implements SessionStore {
  readonly #agents = new Map<string, AgentRecord>();
  readonly #idle: IdleSlots<SessionSlot>;
  readonly #sessions: Map<string, SessionSlot>;
  readonly #ttlMs: number;
  readonly #requestIdsKept: number;
  readonly #callIdsKept: number;
  readonly #requestKeysKept: number;
  readonly #clock: Clock;
  readonly #outbox: MemoryRowOutbox | undefined;

  constructor(options: MemorySessionStoreOptions = {}) {
    this.#outbox = options.outbox;
    this.#ttlMs = options.ttlMs ?? 0;
    this.#requestIdsKept = requestIdsKeptOf(options.requestIdsKept);
    this.#callIdsKept = callIdsKeptOf(options.callIdsKept);
    this.#requestKeysKept = requestKeysKeptOf(options.requestKeysKept);
    this.#clock = options.clock ?? systemClock;
    this.#idle = new IdleSlots(this.#ttlMs, this.#clock);
    this.#sessions = this.#idle.slots;
  }

  #live(sessionId: string): SessionSlot | undefined {
    return this.#idle.live(sessionId);
  }

  /** The live slot of a write, its retention refreshed. */
  #forWrite(sessionId: string): SessionSlot | undefined {
    const slot = this.#live(sessionId);
    if (slot) slot.touched = this.#clock.now();
    return slot;
  }

  async putAgent(agent: AgentRecord): Promise<void> {
    this.#agents.set(agent.agentId, copy(agent));
  }

  async replaceAgent(agent: AgentRecord, expectedVersion: number): Promise<boolean> {
    const current = this.#agents.get(agent.agentId);
    if (!current || current.version !== expectedVersion) return false;
    this.#agents.set(agent.agentId, copy(agent));
    return true;
  }

  async getAgent(agentId: string): Promise<AgentRecord | undefined> {
    const agent = this.#agents.get(agentId);
    return agent && copy(agent);
  }

  async deleteAgent(agentId: string): Promise<void> {
    this.#agents.delete(agentId);
  }

  async createSession(
    meta: SessionMeta,
    log: LogEntry[],
    steps: StepRecord[],
    calls: CallRecord[],
    carry?: SessionCarry,
  ): Promise<string> {
    if (this.#live(meta.sessionId)) throw new Error(`session ${meta.sessionId} exists`);
    const slot: SessionSlot = {
      meta: copy(meta),
      log: copy(log),
      queue: [],
      calls: new Map(calls.map((c) => [c.callId, copy(c)])),
      keys: new Map(),
      sites: new Set(carry?.sites ?? []),
      steps: new Map(steps.map((s) => [s.stepId, copy(s)])),
      requests: new Map(steps.flatMap((s) => (s.requestId ? [[s.requestId, s.stepId] as const] : []))),
      nextItem: (carry?.itemSeq ?? 0) + 1,
      writes: 1,
      touched: this.#clock.now(),
    };
    this.#sessions.set(meta.sessionId, slot);
    return String(slot.writes);
  }

  async getMeta(sessionId: string): Promise<SessionMeta | undefined> {
    const slot = this.#live(sessionId);
    return slot && copy(slot.meta);
  }

  async load(sessionId: string, options: LoadOptions = {}): Promise<SessionState | undefined> {
    const slot = this.#live(sessionId);
    if (!slot) return undefined;
    const at = slot.meta.logFold?.at ?? 0;
    const from = options.window && at <= slot.log.length ? at : 0;
    return copy({
      meta: slot.meta,
      log: from > 0 ? slot.log.slice(from) : slot.log,
      ...(from > 0 ? { logStart: from } : {}),
      queue: slot.queue,
      calls: [...slot.calls.values()],
      sites: [...slot.sites],
      itemSeq: slot.nextItem - 1,
      requestIds: [...slot.requests.keys()],
      version: String(slot.writes),
    });
  }

  async listSessions(tenant: string, limit: number): Promise<SessionMeta[]> {
    return [...this.#sessions.keys()]
      .map((id) => this.#live(id))
      .filter((s): s is SessionSlot => s !== undefined && s.meta.tenant === tenant)
      .map((s) => copy(s.meta))
      .reverse()
      .slice(0, limit);
  }

  async sessionsOfAgent(tenant: string, agentId: string): Promise<string[]> {
    return [...this.#sessions.keys()].filter((id) => {
      const meta = this.#live(id)?.meta;
      return meta?.tenant === tenant && meta.agentId === agentId;
    });
  }

  async deleteSession(sessionId: string): Promise<void> {
    this.#sessions.delete(sessionId);
  }

  async putMeta(meta: SessionMeta): Promise<boolean> {
    const slot = this.#forWrite(meta.sessionId);
    if (!slot) return false;
    slot.meta = copy(meta);
    slot.writes += 1;
    return true;
  }

  async enqueue(sessionId: string, items: NewQueuedItem[], dedupe?: EnqueueDedupe): Promise<EnqueueResult> {
    const slot = this.#forWrite(sessionId);
    if (!slot) return { outcome: 'not_found' };
    if (dedupe?.type === 'key') {
      const known = slot.keys.get(dedupe.key);
      if (known !== undefined) return known === dedupe.fingerprint ? { outcome: 'replayed' } : { outcome: 'conflict' };
      slot.keys.set(dedupe.key, dedupe.fingerprint);
      // Insertion order is recording order: the oldest key leaves first.
      for (const old of slot.keys.keys()) {
        if (slot.keys.size <= this.#requestKeysKept) break;
        slot.keys.delete(old);
      }
    } else if (dedupe?.type === 'site') {
      const site = `${dedupe.callId}|${dedupe.site}`;
      if (slot.sites.has(site)) return { outcome: 'replayed' };
      slot.sites.add(site);
    }
    const queued = items.map((item) => ({ ...copy(item), itemId: `itm_${slot.nextItem++}` }));
    slot.queue.push(...queued);
    return { outcome: 'recorded', items: copy(queued), written: written(slot) };
  }

  async keyFingerprint(sessionId: string, key: string): Promise<string | undefined> {
    return this.#live(sessionId)?.keys.get(key);
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
    const slot = this.#forWrite(sessionId);
    if (!slot) throw new CtxflowError('state_session_not_found', 'session not found');
    if (expectedVersion !== undefined && String(slot.writes) !== expectedVersion) return 'conflict';
    const entries = messages.map((m, i) => ({ ...copy(m), seq: slot.log.length + i }) as MessageEntry);
    slot.log.push(...entries);
    if (meta) slot.meta = copy(meta);
    for (const call of calls) this.#putCall(slot, call);
    return { entries: copy(entries), written: written(slot) };
  }

  async commitStep(sessionId: string, commit: StepCommit): Promise<CommitResult> {
    const slot = this.#forWrite(sessionId);
    if (!slot) return { outcome: 'conflict' };
    const requestId = commit.step.requestId;
    if (requestId !== undefined && slot.requests.has(requestId)) {
      return { outcome: 'duplicate', step: copy(slot.steps.get(slot.requests.get(requestId)!)!) };
    }
    if (commit.expectedVersion !== undefined && String(slot.writes) !== commit.expectedVersion) {
      return { outcome: 'conflict' };
    }
    if (slot.log.length !== commit.expectedLogLength) return { outcome: 'conflict' };
    const queued = new Set(slot.queue.map((q) => q.itemId));
    if (!commit.drain.every((id) => queued.has(id))) return { outcome: 'conflict' };
    const drained = new Set(commit.drain);
    slot.log.push(...copy(commit.rows));
    slot.queue = slot.queue.filter((q) => !drained.has(q.itemId));
    slot.steps.set(commit.step.stepId, copy(commit.step));
    if (requestId !== undefined) {
      slot.requests.set(requestId, commit.step.stepId);
      // Insertion order is commit order: the oldest record leaves first.
      for (const old of slot.requests.keys()) {
        if (slot.requests.size <= this.#requestIdsKept) break;
        slot.requests.delete(old);
      }
    }
    slot.meta = copy(commit.meta);
    this.#outbox?.append(commit.meta.tenant, sessionId, commit.rows, requestId);
    return { outcome: 'committed', version: written(slot).version };
  }

  async rewind(sessionId: string, commit: RewindCommit): Promise<boolean> {
    const slot = this.#forWrite(sessionId);
    if (!slot || slot.log.length !== commit.expectedLogLength) return false;
    slot.log.length = commit.toLength;
    const dropped = new Set(commit.dropItems);
    slot.queue = [...copy(commit.requeue), ...slot.queue.filter((q) => !dropped.has(q.itemId))];
    for (const callId of commit.dropCalls) {
      slot.calls.delete(callId);
      for (const site of slot.sites) if (site.startsWith(`${callId}|tool:`)) slot.sites.delete(site);
    }
    for (const stepId of commit.dropSteps) {
      const step = slot.steps.get(stepId);
      if (step?.requestId !== undefined) slot.requests.delete(step.requestId);
      slot.steps.delete(stepId);
    }
    slot.meta = copy(commit.meta);
    slot.writes += 1;
    return true;
  }

  async putCall(sessionId: string, call: CallRecord): Promise<Written | undefined> {
    const slot = this.#forWrite(sessionId);
    if (!slot) return undefined;
    this.#putCall(slot, call);
    return written(slot);
  }

  #putCall(slot: SessionSlot, call: CallRecord): void {
    slot.calls.set(call.callId, copy(call));
    // A replaced call keeps its place: the oldest call leaves first, with its call sites.
    for (const old of slot.calls.keys()) {
      if (slot.calls.size <= this.#callIdsKept) break;
      slot.calls.delete(old);
      for (const site of slot.sites) if (site.startsWith(`${old}|`)) slot.sites.delete(site);
    }
  }

  async getStep(sessionId: string, ref: StepRef): Promise<StepRecord | undefined> {
    const slot = this.#live(sessionId);
    if (!slot) return undefined;
    if (ref.stepId === undefined && ref.requestId === undefined && ref.ordinal !== undefined) {
      for (const step of slot.steps.values()) if (step.ordinal === ref.ordinal) return copy(step);
      return undefined;
    }
    const stepId = ref.stepId ?? (ref.requestId === undefined ? undefined : slot.requests.get(ref.requestId));
    const step = stepId === undefined ? undefined : slot.steps.get(stepId);
    return step && copy(step);
  }

  async listSteps(sessionId: string): Promise<StepRecord[]> {
    const slot = this.#live(sessionId);
    return slot ? copy([...slot.steps.values()].sort((a, b) => a.ordinal - b.ordinal)) : [];
  }
}
