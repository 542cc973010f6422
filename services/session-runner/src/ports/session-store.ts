import type {
  AgentRecord,
  CallRecord,
  LogEntry,
  NewQueuedItem,
  QueuedItem,
  SessionCarry,
  SessionMeta,
  SessionState,
  StepRecord,
} from '../domain/model.ts';

/** What of the log a load reads. */
export interface LoadOptions {
  /** Only the log window: the entries from `meta.logFold.at` on. */
  window?: boolean;
}

/** How an enqueue is deduplicated. */
export type EnqueueDedupe =
  /** An app request key (R13): same fingerprint replays, another conflicts. */
  | { type: 'key'; key: string; fingerprint: string }
  /** A tool's or hook's call site (R10, R15): first wins, repeats record nothing. */
  | { type: 'site'; callId: string; site: string };

/** A session write's versions: the one it gave the session and the one it replaced. */
export interface Written {
  version: string;
  previous: string;
}

/** A message to append: its seq is given by the store. */
export type NewMessage = Omit<Extract<LogEntry, { type: 'message' }>, 'seq'>;

/** Appended messages with their seq, and the write's versions. */
export interface Appended {
  entries: LogEntry[];
  written: Written;
}

export type EnqueueResult =
  | { outcome: 'recorded'; items: QueuedItem[]; written: Written }
  | { outcome: 'replayed' }
  | { outcome: 'conflict' }
  | { outcome: 'not_found' };

export interface StepCommit {
  step: StepRecord;
  /** Appended in order at `step.logStart`; every entry's seq is its index. */
  rows: LogEntry[];
  /** Queue items delivered by these rows; each must still be queued. */
  drain: string[];
  /** The log length the pass was computed on; another length is a conflict. */
  expectedLogLength: number;
  /**
   * The session version the pass was computed on, when known: any other version is
   * a conflict, so a pass on a held state commits in one write without a read.
   */
  expectedVersion?: string;
  meta: SessionMeta;
  /**
   * `meta` differs from the meta of the state at `expectedVersion` only in `steps`,
   * `lastStepAt`, `lastRequestEnd` and `logFold` (a step inside a run that kept its
   * prefix): a store may write those four alone.
   */
  countersOnly?: boolean;
  /**
   * `drain` is the whole queue of the state at `expectedVersion` (the pass delivers all
   * of it): a store that checks the version need not look at the queued items.
   */
  wholeQueue?: boolean;
}

export type CommitResult =
  /** `version`: the session's version after this commit (it replaced `expectedVersion`). */
  { outcome: 'committed'; version: string } | { outcome: 'duplicate'; step: StepRecord } | { outcome: 'conflict' };

export interface RewindCommit {
  expectedLogLength: number;
  toLength: number;
  /** Items delivered again, placed before what is queued now, in this order (R28). */
  requeue: QueuedItem[];
  /** Queued items removed with their call (R29). */
  dropItems: string[];
  /**
   * Calls removed by the rewind (R29), with their TOOL call sites
   * (`<callId>|tool:...`): a re-run of the call may add again. Hook sites stay,
   * since a hook's items stay queued when its call goes.
   */
  dropCalls: string[];
  /** Steps whose rows were truncated. */
  dropSteps: string[];
  meta: SessionMeta;
}

/**
 * The session-runner's store. Every method is atomic on its own; the adapters
 * (memory-session-store.ts, redis-session-store.ts) pass
 * test/contract/session-store.contract.ts.
 *
 * Retention (`ttlMs` of each adapter, CTXFLOW_SESSION_TTL_MS): a session that no write
 * touched for `ttlMs` is gone from every method, all of its records at once; every
 * write of a session refreshes it. 0 keeps sessions until deleteSession.
 */
/** Which step record getStep reads. */
export interface StepRef {
  stepId?: string;
  requestId?: string;
  ordinal?: number;
}

export interface SessionStore {
  /** Stores a new agent. */
  putAgent(agent: AgentRecord): Promise<void>;
  /** Replaces an agent if its version is still `expectedVersion`; false otherwise. */
  replaceAgent(agent: AgentRecord, expectedVersion: number): Promise<boolean>;
  getAgent(agentId: string): Promise<AgentRecord | undefined>;
  /** Removes an agent's record; nothing when it is absent (idempotent). */
  deleteAgent(agentId: string): Promise<void>;

  /**
   * Creates a session with an initial log (a branch copies one), steps, calls and
   * call sites; never a queue. Item ids continue after `carry.itemSeq`. Returns the
   * session's version.
   */
  createSession(
    meta: SessionMeta,
    log: LogEntry[],
    steps: StepRecord[],
    calls: CallRecord[],
    carry?: SessionCarry,
  ): Promise<string>;
  /** The session's meta alone (ownership checks); undefined when absent. */
  getMeta(sessionId: string): Promise<SessionMeta | undefined>;
  /**
   * Everything a step needs: meta, the log, the queue, the calls. The whole log, or with
   * `window` the log from `meta.logFold.at` on (`logStart` says where it starts; the whole
   * log when the meta has no fold): a read whose cost does not grow with the log.
   */
  load(sessionId: string, options?: LoadOptions): Promise<SessionState | undefined>;
  /** Sessions of a tenant, newest first, at most `limit`. */
  listSessions(tenant: string, limit: number): Promise<SessionMeta[]>;
  /** Ids of the tenant's sessions made for `agentId` (any order). */
  sessionsOfAgent(tenant: string, agentId: string): Promise<string[]>;
  /**
   * Erases every record of the session (meta, log, queue, steps, calls, sites, request
   * ids, key fingerprints, system prompts) and its entry in the tenant's session list.
   * Nothing when the session is absent (idempotent). Branches are sessions of their own.
   */
  deleteSession(sessionId: string): Promise<void>;
  /** Replaces the session meta (thread context edits); false when the session is absent. */
  putMeta(meta: SessionMeta): Promise<boolean>;

  /**
   * Queues items, ids assigned by the store, with the dedupe check and record in
   * the same atomic write: nothing is queued on `replayed` or `conflict`.
   */
  enqueue(sessionId: string, items: NewQueuedItem[], dedupe?: EnqueueDedupe): Promise<EnqueueResult>;

  /**
   * The fingerprint an app request key was recorded with by `enqueue` (R13); undefined
   * when the key or the session is unknown. A read: writes nothing. A key's record
   * never changes once written and exists only in an existing session.
   */
  keyFingerprint(sessionId: string, key: string): Promise<string | undefined>;

  /**
   * Appends messages at the end of the log; returns them with their seq, and the
   * write's versions. Throws when the session is absent. With `expectedVersion` (a
   * session version read before): only while the session still has it, otherwise
   * `conflict` and nothing written (the messages were validated on that read). `calls`: call
   * records written in the same write, each as putCall writes it (a replaced call keeps its place;
   * past the retention the oldest leave with their call sites).
   */
  appendMessages(sessionId: string, messages: NewMessage[], meta?: SessionMeta): Promise<Appended>;
  appendMessages(
    sessionId: string,
    messages: NewMessage[],
    meta: SessionMeta | undefined,
    expectedVersion: string,
    calls?: readonly CallRecord[],
  ): Promise<Appended | 'conflict'>;

  /**
   * The context pass's ONE commit (R2): rows, queue drain, step record (by id and
   * request id) and meta, all or nothing. A request id already committed gives
   * `duplicate` with that step; a changed log or a drained item no longer queued
   * gives `conflict`.
   */
  commitStep(sessionId: string, commit: StepCommit): Promise<CommitResult>;

  /** Truncates the log and applies the queue and call changes in one write; false on conflict. */
  rewind(sessionId: string, commit: RewindCommit): Promise<boolean>;

  /** Inserts or replaces one call record; undefined (nothing written) when the session is absent. */
  putCall(sessionId: string, call: CallRecord): Promise<Written | undefined>;

  /**
   * One step record: by `stepId`, by `requestId`, or by `ordinal` among the surviving steps
   * (a rewind removes the records it cuts, so at most one has an ordinal); the first given of
   * those three is the one read. Undefined when none matches or the session is unknown.
   */
  getStep(sessionId: string, ref: StepRef): Promise<StepRecord | undefined>;
  listSteps(sessionId: string): Promise<StepRecord[]>;
}
