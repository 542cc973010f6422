import type { components } from './generated/openapi.ts';
import type { ProviderFormat, ProviderRequests } from './provider-types.ts';

/**
 * The bodies and answers of the ctxflow HTTP API (Contract v1 and v2) under the client's names:
 * each one the type openapi-typescript generated from the server's `/openapi.json`
 * (generated/openapi.ts). Only the provider request bodies come from the providers' SDKs.
 */
type Schemas = components['schemas'];

// ---------------------------------------------------------------- errors

/** The error bodies of every status a route can answer. */
type ErrorBodies =
  | Schemas['BadRequestErrorBody']
  | Schemas['UnauthorizedErrorBody']
  | Schemas['ForbiddenErrorBody']
  | Schemas['NotFoundErrorBody']
  | Schemas['RequestTimeoutErrorBody']
  | Schemas['ConflictErrorBody']
  | Schemas['PayloadTooLargeErrorBody']
  | Schemas['UnsupportedMediaTypeErrorBody']
  | Schemas['HeaderTooLargeErrorBody']
  | Schemas['TooManyRequestsErrorBody']
  | Schemas['InternalErrorBody']
  | Schemas['UnavailableErrorBody'];

/** Every public error code. */
export type ErrorCode = ErrorBodies['code'];

/** The error form of every refusal. */
export interface ErrorBody {
  error: { code: ErrorCode; message: string; retryable: boolean; details?: unknown };
}

// ---------------------------------------------------------------- shared shapes

/** A hook cursor: any JSON value. */
export type Cursor = string | number | boolean | null | Cursor[] | { [key: string]: Cursor };

export type ContextKind = Schemas['ContextRow']['kind'];
export type RowSource = Schemas['ContextRow']['source'];

/** A context block (N1): verbatim text with an optional opaque id. */
export type ContextBlock = Schemas['ContextBlockInput'];
/** Context input: a string (one unkeyed block) or a list of blocks. */
export type ContextInput = NonNullable<Schemas['CreateSessionRequest']['context']>;

/** An item as a caller adds it (`POST /context`, a tool's addContext). */
export type ContextItem = Schemas['AddContextRequest']['items'][number];

/** A committed context row. */
export type ContextRow = Omit<Schemas['ContextRow'], 'cursor'> & { cursor?: Cursor };

// ---------------------------------------------------------------- agents

/** A tool as the agent declares it; `name` matches `^[A-Za-z0-9_-]{1,64}$`. */
export type ToolDeclaration = Schemas['ToolDeclaration'];
export type CreateAgentRequest = Schemas['CreateAgentRequest'];
export type UpdateAgentRequest = Schemas['UpdateAgentRequest'];
export type Agent = Schemas['Agent'];
export type UpdateAgentAnswer = Schemas['AgentUpdated'];

// ---------------------------------------------------------------- sessions

export type CreateSessionRequest = Schemas['CreateSessionRequest'];
export type UpdateSessionRequest = Schemas['UpdateSessionRequest'];
export type UpdateSessionAnswer = Schemas['SessionUpdated'];
export type SessionSummary = Schemas['SessionSummary'];

/** Why ctxflow recorded a call's result itself. */
export type ToolOutcome = NonNullable<Schemas['ListedMessage']['outcome']>;

/** A recorded message, as a user may see it. */
export type Message = Schemas['ListedMessage'];

export type SessionSnapshot = Omit<Schemas['SessionSnapshot'], 'cursor'> & { cursor: Cursor | null };

// ---------------------------------------------------------------- context

export type AddContextRequest = Schemas['AddContextRequest'];
export type CallContextRequest = Schemas['AddCallContextRequest'];
export type Recorded = Schemas['ContextRecorded'];

// ---------------------------------------------------------------- steps

export type StepMode = NonNullable<Schemas['StepRequest']['mode']>;
/** The step answer's request format: `neutral` (the default) or a provider's request body. */
export type StepFormat = NonNullable<Schemas['StepRequest']['format']>;

export type StepRequest = Schemas['StepRequest'];
export type RestartRequest = Schemas['RestartRunRequest'];

export type RequestTool = Schemas['RequestTool'];
export type RequestToolCall = Schemas['ToolCall'];
export type RowRef = Schemas['RowRef'];
export type RequestMessage = Schemas['NeutralMessage'];
export type ToolChoice = Schemas['ToolChoice'];

/** The neutral model request of Contract v2. */
export type ModelRequest = Schemas['NeutralRequest'];

export type RebuildReason = NonNullable<Schemas['CacheInfo']['reason']>;
export type CacheHints = Schemas['CacheInfo'];
export type SkippedHook = Schemas['Skip'];

/** The step answer (neutral format, the default). */
export type NeutralStepAnswer = Omit<Schemas['NeutralStepAnswer'], 'cursor'> & { cursor: Cursor | null };
/** A step in a provider format: spread `request` into that SDK's call with `model` (and `max_tokens`). */
export type ProviderStepAnswer<F extends ProviderFormat> = Omit<NeutralStepAnswer, 'format' | 'request'> & {
  format: F;
  request: ProviderRequests[F];
};

// ---------------------------------------------------------------- provider usage

/** `POST /sessions/:sessionId/steps/:stepId/usage`: the provider's `usage` as the SDK returned it, with its format. */
export type UsageReport = Schemas['UsageReport'];
/** What ctxflow keeps of a step's usage: tokens, those cached, what the unchanged prefix predicted. */
export type StepUsage = Schemas['StepUsage'];
export type UsageRecorded = Schemas['UsageRecorded'];
/** A session's provider prompt cache in figures (the snapshot's `providerCache`). */
export type ProviderCache = Schemas['ProviderCache'];

// ---------------------------------------------------------------- messages and tool calls

export type ToolCallInput = NonNullable<Schemas['MessageInput']['toolCalls']>[number];
export type MessageInput = Schemas['MessageInput'];
export type GateRequest = Schemas['GateToolCallRequest'];
export type ToolDecision = Schemas['ToolDecision'];
export type ClientAnswer = Schemas['ClientAnswerRecorded'];

// ---------------------------------------------------------------- rewinds, branches, subscriptions

export type RewindRequest = Schemas['RewindRequest'];
export type RewindAnswer = Omit<Schemas['RewindResult'], 'cursor'> & { cursor: Cursor | null };
export type BranchRequest = Schemas['BranchRequest'];

/** A feed's name: a built-in one (`github`, `jira`, `zendesk`, `generic`, `cloudevents`) or a configured source. */
export type FeedSource = Schemas['Subscription']['source'];

export type Subscription = Schemas['Subscription'];
export type SubscriptionAnswer = Schemas['SubscriptionCreated'];
export type UnsubscribeAnswer = Schemas['SubscriptionRemoved'];
