import {
  contextItemSchema,
  idSchema,
  MAX_BATCH_BYTES,
  MAX_CACHE_TTL_MS,
  MAX_DEADLINE_MS,
  STEP_FORMATS,
  STEP_MODES,
  sinceSchema,
} from '@ctxflow/contracts';
import { z } from 'zod';
import { contextInputSchema } from '../domain/context-blocks.ts';
import { PROVIDER_FORMATS } from '../domain/provider-formats/index.ts';
import { TOOL_NAME } from '../domain/tool-schema.ts';

/** A named request schema: its id is its component name in the OpenAPI document. */
function named<S extends z.ZodType>(schema: S, id: string): S {
  return schema.meta({ id, title: id });
}

const toolName = z.string().regex(TOOL_NAME, 'tool names are 1 to 64 letters, digits, _ or -');

/** `parameters` is checked as a JSON Schema by the engine (tool-schema.ts). */
const toolDeclaration = named(
  z.strictObject({
    name: toolName,
    description: z.string().max(4096).optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().optional(),
    client: z.boolean().optional(),
    deadlineMs: z.number().int().positive().max(MAX_DEADLINE_MS).optional(),
    needsApproval: z.boolean().optional(),
  }),
  'ToolDeclaration',
);

export const createAgentBody = named(
  z.strictObject({
    context: contextInputSchema.optional(),
    model: z.string().min(1).max(200).optional(),
    tools: z.array(toolDeclaration).max(256).optional(),
    stepContext: z
      .strictObject({
        url: z.url({ protocol: /^https?$/ }).optional(),
        maxBytes: z.number().int().min(256).max(MAX_BATCH_BYTES).optional(),
        timeoutMs: z.number().int().min(1).max(120_000).optional(),
      })
      .optional(),
    memory: z.strictObject({ autoInject: z.boolean() }).optional(),
    cacheTtlMs: z.number().int().positive().max(MAX_CACHE_TTL_MS).optional(),
  }),
  'CreateAgentRequest',
);

export const patchAgentBody = named(
  z
    .strictObject({ context: contextInputSchema.optional(), model: z.string().min(1).max(200).optional() })
    .refine((b) => b.context !== undefined || b.model !== undefined, 'give context or model'),
  'UpdateAgentRequest',
);

/** `DELETE /agents/:agentId?cascade=true|false` (default false). */
export const deleteAgentQuery = z.strictObject({ cascade: z.enum(['true', 'false']).optional() });

export const memoryBody = named(
  z.strictObject({
    content: z
      .string()
      .min(1)
      .max(32 * 1024),
  }),
  'AddMemoryRequest',
);

export const createSessionBody = named(
  z.strictObject({
    agentId: idSchema.optional(),
    context: contextInputSchema.optional(),
  }),
  'CreateSessionRequest',
);

export const patchSessionBody = named(
  z
    .strictObject({ context: contextInputSchema.optional(), forceRefresh: z.boolean().optional() })
    .refine((b) => b.context !== undefined || b.forceRefresh !== undefined, 'give context or forceRefresh'),
  'UpdateSessionRequest',
);

const { $schema: _, oneOf: itemKinds, ...itemDocument } = z.toJSONSchema(contextItemSchema, { io: 'input' });
/** Each kind's item titled for generators that name it (`NoticeItem`, `ToolsItem`, ...). */
const ITEM_TITLES: Record<string, string> = {
  instruction: 'InstructionItem',
  notice: 'NoticeItem',
  memory: 'MemoryItem',
  tools: 'ToolsItem',
};

/**
 * Items are validated by the domain (R9) so the messages name the item; the document shows
 * them as `contextItemSchema` gives them.
 */
const contextItem = z.unknown().meta({
  ...itemDocument,
  oneOf: (itemKinds as { properties: { kind: { const: string } } }[]).map((kind) => ({
    ...kind,
    title: ITEM_TITLES[kind.properties.kind.const],
  })),
  title: 'ContextItem',
});

export const postContextBody = named(
  z.strictObject({
    sessionId: idSchema,
    items: z.array(contextItem).min(1).max(1000),
    key: idSchema.optional(),
  }),
  'AddContextRequest',
);

export const callContextBody = named(
  z.strictObject({
    origin: z.enum(['tool', 'hook']).default('tool'),
    site: z.string().min(1).max(256).optional(),
    items: z.array(contextItem).min(1).max(1000),
  }),
  'AddCallContextRequest',
);

/**
 * The shape of a step answer's `request` over HTTP: absent for v1, `neutral` for Contract v2's neutral
 * request, or a provider's request body (provider-formats/).
 */
const HTTP_STEP_FORMATS = [...STEP_FORMATS, ...PROVIDER_FORMATS] as const;

/**
 * `since` answers a delta of the neutral request. A provider format converts the whole conversation
 * (Anthropic moves its cache breakpoints, merges turns), so its body is not the previous body with
 * messages appended: `since` with a provider format is refused, naming `since`.
 */
function neutralSince(body: { format?: string | undefined; since?: number | undefined }, ctx: z.RefinementCtx) {
  if (body.since !== undefined && body.format !== undefined && body.format !== 'neutral') {
    ctx.addIssue({
      code: 'custom',
      path: ['since'],
      message: `a delta (since) is answered for the neutral request only, not with format ${body.format}`,
    });
  }
}

export const stepBody = named(
  z
    .strictObject({
      mode: z.enum(STEP_MODES).optional(),
      requestId: idSchema.optional(),
      format: z.enum(HTTP_STEP_FORMATS).optional(),
      since: sinceSchema.optional(),
    })
    .superRefine(neutralSince)
    .default({}),
  'StepRequest',
);

export const restartBody = named(
  z
    .strictObject({
      requestId: idSchema.optional(),
      format: z.enum(HTTP_STEP_FORMATS).optional(),
      since: sinceSchema.optional(),
    })
    .superRefine(neutralSince)
    .default({}),
  'RestartRunRequest',
);

/** A tool call's arguments: the JSON text of an object, as the model produced it. */
export const MAX_ARGUMENTS_BYTES = 256 * 1024;
const toolArguments = z
  .string()
  .max(MAX_ARGUMENTS_BYTES)
  .refine((text) => {
    try {
      const value = JSON.parse(text);
      return typeof value === 'object' && value !== null && !Array.isArray(value);
    } catch {
      return false;
    }
  }, 'arguments must be the JSON text of an object');

export const messageBody = named(
  z.strictObject({
    role: z.enum(['user', 'assistant', 'tool']),
    content: z.string().max(1024 * 1024),
    callId: idSchema.optional(),
    toolCalls: z
      .array(
        z.strictObject({
          callId: idSchema,
          name: z.string().min(1).max(128),
          arguments: toolArguments.optional(),
        }),
      )
      .max(256)
      .optional(),
  }),
  'MessageInput',
);

/** `{ messages }`: an assistant turn with its tool results (or any messages), recorded in one write. */
export const messageBatchBody = z.strictObject({ messages: z.array(messageBody).min(1).max(256) });

/**
 * `POST /sessions/:id/messages`: one message (v1), or `{ messages }`. One object whose fields are
 * those of either shape (what generated clients read best); a body is checked as the shape it is.
 */
export const appendMessagesBody = named(
  z
    .strictObject({
      role: messageBody.shape.role.optional(),
      content: messageBody.shape.content.optional(),
      callId: messageBody.shape.callId,
      toolCalls: messageBody.shape.toolCalls,
      messages: messageBatchBody.shape.messages.optional().describe('Several messages in one write'),
    })
    .superRefine((body, ctx) => {
      // The fields were checked above; what is left is which shape the body is: a batch has no
      // message field beside `messages`, a single message has every field it requires.
      const batch = body.messages !== undefined;
      const parsed = (batch ? messageBatchBody : messageBody).safeParse(body);
      const fields = body as Record<string, unknown>;
      for (const issue of parsed.error?.issues ?? []) {
        const absent = issue.path.length === 1 && fields[issue.path[0] as string] === undefined;
        if (issue.code === 'unrecognized_keys' || (!batch && absent)) {
          ctx.addIssue({ code: 'custom', path: issue.path, message: issue.message });
        }
      }
    }),
  'AppendMessagesRequest',
);

export const toolCallBody = named(
  z.strictObject({ callId: idSchema, name: z.string().min(1).max(128) }),
  'GateToolCallRequest',
);
export const approvalBody = named(z.strictObject({ approved: z.boolean() }), 'ApprovalRequest');
export const answerBody = named(z.strictObject({ content: z.string().max(1024 * 1024) }), 'ClientAnswerRequest');

export const rewindBody = named(
  z
    .strictObject({ toStepId: idSchema.optional(), beforeStepId: idSchema.optional() })
    .refine(
      (b) => (b.toStepId === undefined) !== (b.beforeStepId === undefined),
      'give exactly one of toStepId, beforeStepId',
    ),
  'RewindRequest',
);

export const branchBody = named(z.strictObject({ atStepId: idSchema.optional() }).default({}), 'BranchRequest');

/** `GET /sessions/:id/stream?follow=false` replays the recent chunks and ends. */
export const streamQuery = z.object({ follow: z.enum(['true', 'false']).optional() });

/** A reconnecting client names the last event it saw: the replay starts after it. */
export const streamHeaders = z.object({
  'last-event-id': z.string().max(256).optional().describe('The id of the last event this client received'),
});
