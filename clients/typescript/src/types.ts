import type { ProviderFormat, ProviderRequests } from './provider-types.ts';

/**
 * The bodies and answers of the ctxflow HTTP API (Contract v1 and v2). A test in the ctxflow
 * repository checks them against the server's zod schemas and the engine's answer types.
 */

// ---------------------------------------------------------------- errors

/** Every public error code (shared/contracts/src/errors.ts). */
export type ErrorCode =
  | 'validation_error'
  | 'unauthorized'
  | 'forbidden'
  | 'state_session_not_found'
  | 'state_agent_not_found'
  | 'state_step_not_found'
  | 'state_call_not_found'
  | 'feed_disabled'
  | 'not_found'
  | 'request_timeout'
  | 'state_context_key_conflict'
  | 'state_agent_in_use'
  | 'state_conflict'
  | 'state_calls_pending'
  | 'rate_limited'
  | 'quota_exceeded'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'header_too_large'
  | 'bus_unavailable'
  | 'store_unavailable'
  | 'internal_error';

/** The error form of every refusal. */
export interface ErrorBody {
  error: { code: ErrorCode; message: string; retryable: boolean; details?: unknown };
}

// ---------------------------------------------------------------- shared shapes

/** A hook cursor: any JSON value. */
export type Cursor = string | number | boolean | null | Cursor[] | { [key: string]: Cursor };

export type ContextKind = 'instruction' | 'notice' | 'tools' | 'memory';
export type RowSource = 'app' | 'hook' | 'tool' | 'memory' | 'late-answer';

/** A context block (N1): verbatim text with an optional opaque id. */
export interface ContextBlock {
  id?: string;
  content: string;
}
/** Context input: a string (one unkeyed block) or a list of blocks. */
export type ContextInput = string | ContextBlock[];

/** An item as a caller adds it (`POST /context`, a tool's addContext). */
export type ContextItem =
  | { kind: 'instruction' | 'notice' | 'memory'; content: string; source?: RowSource }
  | { kind: 'tools'; disable?: string[]; enable?: string[]; source?: RowSource };

/** A committed context row. */
export interface ContextRow {
  id: string;
  role: 'context';
  kind: ContextKind;
  source: RowSource;
  content?: string;
  disable?: string[];
  enable?: string[];
  cursor?: Cursor;
}

// ---------------------------------------------------------------- agents

/** A tool as the agent declares it; `name` matches `^[A-Za-z0-9_-]{1,64}$`. */
export interface ToolDeclaration {
  name: string;
  description?: string;
  /** A JSON Schema object for the call's arguments. */
  parameters?: Record<string, unknown>;
  strict?: boolean;
  /** The runtime's client executes it. */
  client?: boolean;
  deadlineMs?: number;
  needsApproval?: boolean;
}

export interface CreateAgentRequest {
  context?: ContextInput;
  model?: string;
  tools?: ToolDeclaration[];
  stepContext?: { url?: string; maxBytes?: number; timeoutMs?: number };
  memory?: { autoInject: boolean };
  cacheTtlMs?: number;
}

export interface UpdateAgentRequest {
  context?: ContextInput;
  model?: string;
}

export interface Agent {
  agentId: string;
  context: ContextBlock[];
  model: string | null;
  tools: ToolDeclaration[];
  stepContext: { url?: string; maxBytes: number; timeoutMs: number };
  memory: { autoInject: boolean };
  cacheTtlMs: number;
  version: number;
}

export interface UpdateAgentAnswer {
  agentId: string;
  version: number;
  appliesFrom: 'next_run';
}

// ---------------------------------------------------------------- sessions

export interface CreateSessionRequest {
  agentId?: string;
  context?: ContextInput;
}

export interface UpdateSessionRequest {
  context?: ContextInput;
  forceRefresh?: boolean;
}

export interface UpdateSessionAnswer {
  staged: boolean;
  forceRefresh: boolean;
}

export interface SessionSummary {
  sessionId: string;
  agentId: string | null;
  createdAt: string;
  steps: number;
  branchOf: { sessionId: string; atStepId?: string } | null;
}

/** Why ctxflow recorded a call's result itself. */
export type ToolOutcome = 'tool_inactive' | 'tool_unavailable' | 'approval_denied' | 'deadline_missed' | 'finished';

/** A recorded message, as a user may see it. */
export interface Message {
  seq: number;
  role: 'user' | 'assistant' | 'tool';
  content: string;
  at: string;
  callId?: string;
  name?: string;
  outcome?: ToolOutcome;
  toolCalls?: { callId: string; name: string; arguments?: string }[];
}

export interface SessionSnapshot {
  sessionId: string;
  agentId: string | null;
  createdAt: string;
  branchOf: { sessionId: string; atStepId?: string } | null;
  messages: Message[];
  steps: number;
  queued: number;
  cursor: Cursor | null;
  activeTools: string[];
}

// ---------------------------------------------------------------- context

export interface AddContextRequest {
  sessionId: string;
  items: ContextItem[];
  /** Idempotency key: the same key and items record nothing again (R13). */
  key?: string;
}

export interface CallContextRequest {
  origin?: 'tool' | 'hook';
  site?: string;
  items: ContextItem[];
}

export interface Recorded {
  recorded: number;
}

// ---------------------------------------------------------------- steps

export type StepMode = 'first' | 'retry' | 'forced_completion';
/** The step answer's request format: `neutral` (the default) or a provider's request body. */
export type StepFormat = 'neutral' | ProviderFormat;

export interface StepRequest {
  mode?: StepMode;
  /** Makes a repeated request a no-op that answers the same step. */
  requestId?: string;
  /** The message count the runtime already holds: the answer carries only what comes after it (neutral format). */
  since?: number;
  format?: StepFormat;
}

export interface RestartRequest {
  requestId?: string;
  since?: number;
  format?: StepFormat;
}

export interface RequestTool {
  name: string;
  description?: string;
  parameters?: Record<string, unknown>;
  strict?: boolean;
}
export interface RequestToolCall {
  callId: string;
  name: string;
  /** The JSON text the model produced. */
  arguments: string;
}
export interface RowRef {
  id: string;
  kind: ContextKind;
  source: RowSource;
}
export type RequestMessage =
  | { role: 'system'; content: string }
  | { role: 'system' | 'user'; content: string; row: RowRef }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: RequestToolCall[] }
  | { role: 'tool'; content: string; callId: string; name: string }
  /** A result without its call in the assistant turn before it (send it as a user turn). */
  | { role: 'tool'; content: string; callId?: string; name?: string };
export type ToolChoice = 'auto' | { type: 'tool'; name: string };

/** The neutral model request of Contract v2. */
export interface ModelRequest {
  messages: RequestMessage[];
  tools: RequestTool[];
  activeTools: string[];
  system: string;
  model: string | null;
  toolChoice: ToolChoice;
  /**
   * Present when the step was asked with `since` (a delta answer): `messages` holds the messages from
   * index `since` on. `0` when the delta could not be given: `messages` is the whole list, to replace
   * what the runtime holds.
   */
  since?: number;
}

export type RebuildReason = 'new_thread' | 'agent_context' | 'model_change' | 'force_refresh' | 'cache_cold' | 'branch';

export interface CacheHints {
  rebuilt: boolean;
  reason: RebuildReason | null;
  /** A provider cache key, stable for the session. */
  key: string;
  /** Index in `request.messages` of the last message of the system prefix; -1 when none. */
  prefixEnd: number;
  /** How many messages the previous request of the session had. */
  previousEnd: number;
}

export interface SkippedHook {
  reason: 'hook_error' | 'hook_timeout' | 'hook_invalid' | 'memory_too_large';
  message: string;
}

interface StepAnswerBase {
  stepId: string;
  mode: StepMode;
  rows: ContextRow[];
  cursor: Cursor | null;
  skipped: SkippedHook[];
}
/** The step answer (neutral format, the default). */
export interface NeutralStepAnswer extends StepAnswerBase {
  request: ModelRequest;
  cache: CacheHints;
}
/** A step in a provider format: spread `request` into that SDK's call with `model` (and `max_tokens`). */
export interface ProviderStepAnswer<F extends ProviderFormat> extends StepAnswerBase {
  request: ProviderRequests[F];
  cache: CacheHints;
}

// ---------------------------------------------------------------- messages and tool calls

export interface ToolCallInput {
  callId: string;
  name: string;
  /** The JSON text of an object, as the model produced it. */
  arguments?: string;
}

export interface MessageInput {
  role: 'user' | 'assistant' | 'tool';
  content: string;
  /** A tool message: the call it answers. */
  callId?: string;
  /** An assistant message: the calls the model made. */
  toolCalls?: ToolCallInput[];
}

export interface GateRequest {
  callId: string;
  name: string;
}

export type ToolDecision =
  | { execute: true; client?: true; deadlineAt?: string }
  | { execute: false; reason: 'tool_inactive' | 'tool_unavailable' | 'approval_required' | 'approval_denied' };

export interface ClientAnswer {
  late: boolean;
  recorded: number;
}

// ---------------------------------------------------------------- rewinds, branches, subscriptions

export type RewindRequest =
  | { toStepId: string; beforeStepId?: undefined }
  | { beforeStepId: string; toStepId?: undefined };

export interface RewindAnswer {
  logLength: number;
  requeued: number;
  queued: number;
  cursor: Cursor | null;
  activeTools: string[];
}

export interface BranchRequest {
  atStepId?: string;
}

/** A feed's name: a built-in one (`github`, `jira`, `zendesk`, `generic`, `cloudevents`) or a configured source. */
export type FeedSource = string;

export interface Subscription {
  source: FeedSource;
  /** A ticket key, or `*` with a `scope` (a whole repository, project or account). */
  ticket: string;
  scope?: string;
}

export interface SubscriptionAnswer {
  sessionId: string;
  subscription: Subscription;
  created: boolean;
}
export interface UnsubscribeAnswer {
  sessionId: string;
  subscription: Subscription;
  removed: boolean;
}
