import { STEP_MODES, ticketUpdateRefSchema } from '@ctxflow/contracts';
import { z } from 'zod';
import { contextBlockSchema } from '../domain/context-blocks.ts';
import { anthropicRequest, openAIChatRequest, openAIResponsesRequest } from './provider-answers.ts';
import { providerCache } from './usage-schemas.ts';

/**
 * The answers of the session routes, as routes declare them (`schema.response`): the server
 * serializes every answer through its schema (nothing undeclared leaves it) and the OpenAPI
 * document shows each under its `id`.
 */

/** A named schema: its id is its component name in the document. */
function named<S extends z.ZodType>(schema: S, id: string, description?: string): S {
  return schema.meta({ id, title: id, ...(description ? { description } : {}) });
}

const int = z.number().int().max(Number.MAX_SAFE_INTEGER).meta({ format: 'int64' });

export const cursor = named(
  z.unknown(),
  'Cursor',
  'An opaque cursor: send it back as it came; null before the first batch.',
);

const rowKind = z.enum(['instruction', 'notice', 'tools', 'memory']);
const rowSource = z.enum(['app', 'hook', 'tool', 'memory', 'late-answer']);

/** One ticket update a hook row carried. */
export const ticketUpdateRef = named(
  ticketUpdateRefSchema,
  'TicketUpdateRef',
  "A ticket update: its feed and the feed's event id (the delivery id the feed deduplicates by).",
);

export const contextRow = named(
  z.object({
    id: z.string(),
    role: z.literal('context'),
    kind: rowKind,
    source: rowSource,
    content: z.string().optional(),
    disable: z.array(z.string()).optional(),
    enable: z.array(z.string()).optional(),
    cursor: cursor.optional(),
    ticketUpdates: z
      .array(ticketUpdateRef)
      .optional()
      .describe('Hook rows: the ticket updates the notice carried (several when coalesced).'),
  }),
  'ContextRow',
);

const toolCall = named(
  z.object({ callId: z.string(), name: z.string(), arguments: z.string().describe('The JSON text of an object') }),
  'ToolCall',
);

const requestTool = named(
  z.object({
    name: z.string(),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional().describe('A JSON Schema object, as declared'),
    strict: z.boolean().optional(),
  }),
  'RequestTool',
);

const neutralMessage = named(
  z.object({
    role: z.enum(['system', 'user', 'assistant', 'tool']),
    content: z.string(),
    row: z
      .object({ id: z.string(), kind: rowKind, source: rowSource })
      .meta({ id: 'RowRef', title: 'RowRef' })
      .optional()
      .describe('On a context row: which row'),
    toolCalls: z.array(toolCall).optional().describe('On an assistant message that called tools'),
    callId: z.string().optional().describe('On a tool result: its call'),
    name: z.string().optional().describe("On a tool result: its call's tool"),
  }),
  'NeutralMessage',
);

const toolChoice = named(
  z.xor([z.literal('auto'), named(z.object({ type: z.literal('tool'), name: z.string() }), 'ToolChoiceTool')]),
  'ToolChoice',
  '`auto`, or in forced completion the completion tool',
);

export const neutralRequest = named(
  z.object({
    messages: z.array(neutralMessage),
    tools: z.array(requestTool),
    activeTools: z.array(z.string()),
    system: z.string(),
    model: z.string().nullable(),
    toolChoice,
    since: int.optional().describe('On a delta answer: `messages` starts at this index (0: the whole list)'),
  }),
  'NeutralRequest',
);

const cacheInfo = named(
  z.object({
    rebuilt: z.boolean(),
    reason: z.enum(['new_thread', 'agent_context', 'model_change', 'force_refresh', 'cache_cold', 'branch']).nullable(),
    key: z.string(),
    prefixEnd: int.min(-1),
    previousEnd: int.min(0),
  }),
  'CacheInfo',
);

const stepFields = {
  stepId: z.string(),
  mode: z.enum(STEP_MODES),
  rows: z.array(contextRow),
  cursor,
  cache: cacheInfo,
  skipped: z.array(named(z.object({ reason: z.string(), message: z.string() }), 'Skip')),
};

function stepAnswerOf<F extends string, R extends z.ZodType>(format: F, request: R, id: string) {
  return named(z.object({ format: z.literal(format), ...stepFields, request }), id);
}

export const neutralStepAnswer = stepAnswerOf('neutral', neutralRequest, 'NeutralStepAnswer');
const openAIChatStepAnswer = stepAnswerOf('openai-chat', openAIChatRequest, 'OpenAIChatStepAnswer');
const openAIResponsesStepAnswer = stepAnswerOf('openai-responses', openAIResponsesRequest, 'OpenAIResponsesStepAnswer');
const anthropicStepAnswer = stepAnswerOf('anthropic', anthropicRequest, 'AnthropicStepAnswer');

const ref = (id: string) => `#/components/schemas/${id}`;

/** A step's answer, by its `format`: the neutral request (the default) or a provider API's body. */
export const stepAnswer = z
  .discriminatedUnion('format', [
    neutralStepAnswer,
    openAIChatStepAnswer,
    openAIResponsesStepAnswer,
    anthropicStepAnswer,
  ])
  .meta({
    id: 'StepAnswer',
    title: 'StepAnswer',
    description: "A step's answer: `request` is the neutral request, or with `format` that provider API's body",
    discriminator: {
      propertyName: 'format',
      mapping: {
        neutral: ref('NeutralStepAnswer'),
        'openai-chat': ref('OpenAIChatStepAnswer'),
        'openai-responses': ref('OpenAIResponsesStepAnswer'),
        anthropic: ref('AnthropicStepAnswer'),
      },
    },
  });

const toolOutcome = z.enum(['tool_inactive', 'tool_unavailable', 'approval_denied', 'deadline_missed', 'finished']);

export const listedMessage = named(
  z.object({
    seq: int,
    role: z.enum(['user', 'assistant', 'tool']),
    content: z.string(),
    at: z.string(),
    callId: z.string().optional(),
    name: z.string().optional(),
    outcome: toolOutcome.optional().describe('On a result ctxflow recorded itself: why'),
    toolCalls: z.array(z.object({ callId: z.string(), name: z.string(), arguments: z.string().optional() })).optional(),
  }),
  'ListedMessage',
);

export const messageList = named(z.object({ messages: z.array(listedMessage) }), 'MessageList');

export const messagesAppended = named(
  z.object({
    seq: int.optional().describe('One message recorded: its seq'),
    seqs: z.array(int).optional().describe('`{ messages }` recorded: each seq, in order'),
  }),
  'MessagesAppended',
);

const branchOf = z
  .object({ sessionId: z.string(), atStepId: z.string().optional() })
  .meta({ id: 'BranchOrigin', title: 'BranchOrigin' })
  .nullable();

export const sessionSnapshot = named(
  z.object({
    sessionId: z.string(),
    agentId: z.string().nullable(),
    createdAt: z.string(),
    branchOf,
    messages: z.array(listedMessage),
    steps: int,
    queued: int,
    cursor,
    activeTools: z.array(z.string()),
    providerCache,
  }),
  'SessionSnapshot',
);

export const sessionList = named(
  z.object({
    sessions: z.array(
      named(
        z.object({
          sessionId: z.string(),
          agentId: z.string().nullable(),
          createdAt: z.string(),
          steps: int,
          branchOf,
        }),
        'SessionSummary',
      ),
    ),
  }),
  'SessionList',
);

export const sessionInspection = named(
  z.record(z.string(), z.unknown()),
  'SessionInspection',
  "The operator's view: meta, the whole log (rows included), queue, calls, cursor, active tools, recent events, the steps' provider usage and the provider cache",
);

export const sessionUpdated = named(z.object({ staged: z.boolean(), forceRefresh: z.boolean() }), 'SessionUpdated');
export const sessionCreated = named(z.object({ sessionId: z.string() }), 'SessionCreated');
export const agentCreated = named(z.object({ agentId: z.string() }), 'AgentCreated');
export const agentUpdated = named(
  z.object({ agentId: z.string(), version: int, appliesFrom: z.literal('next_run') }),
  'AgentUpdated',
);
export const memoryAdded = named(z.object({ remembered: z.boolean().describe('Always true') }), 'MemoryAdded');

export const agent = named(
  z.object({
    agentId: z.string(),
    context: z.array(contextBlockSchema),
    model: z.string().nullable(),
    tools: z.array(
      named(
        requestTool.extend({
          client: z.boolean().optional(),
          deadlineMs: int.optional(),
          needsApproval: z.boolean().optional(),
        }),
        'AgentTool',
      ),
    ),
    stepContext: z
      .object({ url: z.string().optional(), maxBytes: int, timeoutMs: int })
      .meta({ id: 'StepContextSettings', title: 'StepContextSettings' }),
    memory: z.object({ autoInject: z.boolean() }).meta({ id: 'MemorySettings', title: 'MemorySettings' }),
    cacheTtlMs: int,
    version: int,
  }),
  'Agent',
);

export const contextRecorded = named(z.object({ recorded: int }), 'ContextRecorded');

export const toolDecision = named(
  z.object({
    execute: z.boolean(),
    reason: z
      .enum(['tool_inactive', 'tool_unavailable', 'approval_required', 'approval_denied'])
      .optional()
      .describe('When `execute` is false: why'),
    client: z.boolean().optional().describe('A client tool: the runtime runs it and answers before `deadlineAt`'),
    deadlineAt: z.string().optional(),
  }),
  'ToolDecision',
);

export const clientAnswerRecorded = named(z.object({ late: z.boolean(), recorded: int }), 'ClientAnswerRecorded');

export const rewindResult = named(
  z.object({ logLength: int, requeued: int, queued: int, cursor, activeTools: z.array(z.string()) }),
  'RewindResult',
);
