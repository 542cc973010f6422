import type { ContextRow, Cursor, RowSource, SourcedItem, StepMode } from '@ctxflow/contracts';

/** A context block (N1): verbatim text with an optional opaque id (N2). */
export interface ContextBlock {
  id?: string;
  content: string;
}

/** A tool as the agent declares it. The model is always offered every declared tool (R16). */
export interface ToolDeclaration {
  name: string;
  description?: string;
  /** A JSON Schema object for the call's arguments, offered to the model as declared (Contract v2). */
  parameters?: Record<string, unknown>;
  /** Ask the provider to hold the model to `parameters` exactly. */
  strict?: boolean;
  /** The runtime's client executes it; an answer after `deadlineMs` becomes a late-answer notice (R35). */
  client?: boolean;
  deadlineMs?: number;
  /** A call waits for an approval before it runs (R21). */
  needsApproval?: boolean;
}

export interface StepContextSettings {
  /** An HTTP hook: POST `{ sessionId, cursor }`, answer `{ items, cursor }`. Absent: the ticket feed. */
  url?: string;
  /** A batch with its cursor, in bytes of JSON (R25). */
  maxBytes: number;
  /** The hook's time limit; its abort signal fires then (R25). */
  timeoutMs: number;
}

export interface AgentRecord {
  agentId: string;
  tenant: string;
  /** Frozen into each run when the run is created (N3). */
  context: ContextBlock[];
  model?: string;
  /** Declared tools, `__finish__` last unless declared explicitly. */
  tools: ToolDeclaration[];
  stepContext: StepContextSettings;
  memory: { autoInject: boolean };
  /** A prefix idle longer than this is treated as gone cold (N4). */
  cacheTtlMs: number;
  createdAt: string;
  version: number;
}

/** A run: the steps between two user turns; it freezes the agent context (N3). */
export interface RunState {
  runId: string;
  agentContext: ContextBlock[];
  model?: string;
  /** Log length when the run started: where a failed run restarts from (R31). */
  startLength: number;
  /** Steps committed before the run started. */
  startOrdinal: number;
  open: boolean;
}

export interface SessionMeta {
  sessionId: string;
  tenant: string;
  agentId?: string;
  createdAt: string;
  /** Thread context (N4): `live` is in the cached prefix, `staged` waits for the next rebuild. */
  thread: { live: ContextBlock[]; staged?: ContextBlock[] };
  /** A forceRefresh asked for; folded at the next step (N5). */
  forceRefresh: boolean;
  run?: RunState;
  /** The system prefix the last request carried, with what it was built from. */
  prefix?: { system: string; agentContext: ContextBlock[]; model?: string };
  /** Milliseconds since the epoch of the last step's commit (cache warmth). */
  lastStepAt?: number;
  /** Surviving steps: the next step's ordinal is `steps + 1`. */
  steps: number;
  /** Log length the last request covered (for prompt-prefix reuse). */
  lastRequestEnd?: number;
  branchOf?: { sessionId: string; atStepId?: string };
  /**
   * The provider cache key (Contract v2 `cache.key`) when not the session's own: a branch keeps the
   * key of the session it was branched from. Absent: `ctxflow-` + SHA-256 of the session id.
   */
  cacheKey?: string;
  /**
   * What a step and a message append need of the log before the last request's end, as it was
   * when the last user message came (log-window.ts): a session is read from there on (its log
   * window), so their cost does not grow with the log. Absent: the session is read whole.
   */
  logFold?: LogFold;
}

/**
 * The log before `at` (where the last request ended when a user message came), folded: everything
 * a context pass or a message append on the entries from `at` on needs of the ones before it.
 */
export interface LogFold {
  at: number;
  /** The cursor of the last row before `at` that carries one (R23). */
  cursor?: Cursor;
  /** The `tools` rows before `at`, in log order (the active tools fold over these, R16-R20). */
  toolRows: RowEntry[];
  /** Bytes of the JSON of the first `at` messages of the log view (LogView.bytes). */
  bytes: number;
}

export type MessageRole = 'user' | 'assistant' | 'tool';

/** A call the model made; `arguments` is the JSON text it produced (absent in entries recorded by v1 clients). */
export interface ToolCallEntry {
  callId: string;
  name: string;
  arguments?: string;
}

export interface MessageEntry {
  type: 'message';
  seq: number;
  role: MessageRole;
  content: string;
  /** A tool message: the call it answers. */
  callId?: string;
  /** A tool message: the name of the call it answers (absent in entries written before Contract v2). */
  name?: string;
  /** A tool message ctxflow recorded itself: why the call has no result of its own. */
  outcome?: ToolOutcome;
  toolCalls?: ToolCallEntry[];
  at: string;
}

/** Why ctxflow answered a call itself: the gate refused it, its approval was denied, its client missed the deadline, or it finished the run. */
export type ToolOutcome = 'tool_inactive' | 'tool_unavailable' | 'approval_denied' | 'deadline_missed' | 'finished';

export interface RowEntry {
  type: 'row';
  seq: number;
  row: ContextRow;
  stepId: string;
  /** The queued item this row delivered; absent for hook and memory rows. */
  itemId?: string;
  /** The queue record, kept so a rewind can deliver it again (R28). */
  queued?: QueuedItem;
  at: string;
}

export type LogEntry = MessageEntry | RowEntry;

/** An item waiting for the next model call (R7). */
export interface QueuedItem {
  itemId: string;
  item: SourcedItem;
  /** The tool call that queued it: a rewind that removes the call removes the item (R29). */
  callId?: string;
  /** Steps committed when the call was made (see CallRecord.stepIndex). */
  callStepIndex?: number;
  at: string;
}

export type NewQueuedItem = Omit<QueuedItem, 'itemId'>;

/**
 * A call's status: the gate's decision and what followed it; `called` for a call an assistant
 * message made that the gate has not decided (the record only says the message made it).
 */
export type CallStatus =
  | 'called'
  | 'executed'
  | 'refused'
  | 'awaiting_approval'
  | 'awaiting_client'
  | 'answered'
  | 'denied';

/**
 * What the session keeps of one tool call (the last CTXFLOW_CALL_IDS_KEPT calls,
 * adapters/request-retention.ts): the gate's decision, and where the log has the call, so an
 * append on the log window knows a call id used before it (use-cases/messages.ts).
 */
export interface CallRecord {
  callId: string;
  name: string;
  /** Steps committed when the call was made: the call answers model call number `stepIndex`. */
  stepIndex: number;
  status: CallStatus;
  reason?: string;
  deadlineAt?: number;
  /** An assistant message of the log made the call: another one with its callId is refused. */
  inMessage?: true;
  /** The seq of the call's first result (a tool message) in the log. */
  resultSeq?: number;
}

export interface StepRecord {
  stepId: string;
  requestId?: string;
  ordinal: number;
  mode: StepMode;
  runId: string;
  /** Log positions: rows of this step are `[logStart, logEnd)`. */
  logStart: number;
  logEnd: number;
  rowIds: string[];
  system: string;
  activeTools: string[];
  cursor?: Cursor;
  cache: { rebuilt: boolean; reason?: RebuildReason };
  /** Messages the previous request of the session had (Contract v2 cache hints); absent in steps written before. */
  previousEnd?: number;
  /** The agent's model of the step's run; absent when none (and in steps written before Contract v2). */
  model?: string;
  at: string;
}

export type RebuildReason = 'new_thread' | 'agent_context' | 'model_change' | 'force_refresh' | 'cache_cold' | 'branch';

export interface SessionState {
  meta: SessionMeta;
  /** The log from `logStart` on: all of it, or its window (`meta.logFold`). */
  log: LogEntry[];
  /** The seq of `log[0]`: 0 (absent) for the whole log, `meta.logFold.at` for a window. */
  logStart?: number;
  queue: QueuedItem[];
  calls: CallRecord[];
  /** First-wins call sites recorded (`<callId>|<origin>:<site>`), in no particular order. */
  sites: string[];
  /** The last item number the store assigned: a branch continues from it, so item ids never collide. */
  itemSeq: number;
  /** The request ids of the committed steps, in no particular order. */
  requestIds: string[];
  /**
   * The session's version: every write of the session gives it a new one, never
   * issued before. A state of version v is the current state exactly while the
   * store still has v. '' for a session not written since versions existed.
   */
  version: string;
}

/** What a branch carries over besides its log: call sites and the item counter (R10, R32). */
export interface SessionCarry {
  sites: string[];
  itemSeq: number;
}

export type SkipReason = 'hook_error' | 'hook_timeout' | 'hook_invalid' | 'memory_too_large';

/** A chunk on the session's stream. Never carries a context row (R4). */
export type StreamChunk =
  | { type: 'context_skipped'; stepId: string; reason: SkipReason; message: string; at: string }
  | { type: 'step'; stepId: string; mode: StepMode; rowCount: number; at: string }
  | { type: 'message'; seq: number; role: MessageRole; content: string; at: string }
  | { type: 'rewind'; toLength: number; at: string };

export type { RowSource };
