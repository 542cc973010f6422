import {
  CtxflowError,
  idSchema,
  MAX_BATCH_BYTES,
  MAX_CACHE_TTL_MS,
  MAX_DEADLINE_MS,
  MAX_ERROR_DETAILS,
  STEP_FORMATS,
  STEP_MODES,
  sinceSchema,
} from '@ctxflow/contracts';
import { z } from 'zod';
import { contextInputSchema } from '../domain/context-blocks.ts';
import { PROVIDER_FORMATS } from '../domain/provider-formats/index.ts';
import { TOOL_NAME } from '../domain/tool-schema.ts';

const toolName = z.string().regex(TOOL_NAME, 'tool names are 1 to 64 letters, digits, _ or -');

/** `parameters` is checked as a JSON Schema by the engine (tool-schema.ts). */
const toolDeclaration = z.strictObject({
  name: toolName,
  description: z.string().max(4096).optional(),
  parameters: z.record(z.string(), z.unknown()).optional(),
  strict: z.boolean().optional(),
  client: z.boolean().optional(),
  deadlineMs: z.number().int().positive().max(MAX_DEADLINE_MS).optional(),
  needsApproval: z.boolean().optional(),
});

export const createAgentBody = z.strictObject({
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
});

export const patchAgentBody = z
  .strictObject({ context: contextInputSchema.optional(), model: z.string().min(1).max(200).optional() })
  .refine((b) => b.context !== undefined || b.model !== undefined, 'give context or model');

/** `DELETE /agents/:agentId?cascade=true|false` (default false). */
export const deleteAgentQuery = z.strictObject({ cascade: z.enum(['true', 'false']).optional() });

export const memoryBody = z.strictObject({
  content: z
    .string()
    .min(1)
    .max(32 * 1024),
});

export const createSessionBody = z.strictObject({
  agentId: idSchema.optional(),
  context: contextInputSchema.optional(),
});

export const patchSessionBody = z
  .strictObject({ context: contextInputSchema.optional(), forceRefresh: z.boolean().optional() })
  .refine((b) => b.context !== undefined || b.forceRefresh !== undefined, 'give context or forceRefresh');

/** Items are validated by the domain (R9) so the messages name the item. */
export const postContextBody = z.strictObject({
  sessionId: idSchema,
  items: z.array(z.unknown()).min(1).max(1000),
  key: idSchema.optional(),
});

export const callContextBody = z.strictObject({
  origin: z.enum(['tool', 'hook']).default('tool'),
  site: z.string().min(1).max(256).optional(),
  items: z.array(z.unknown()).min(1).max(1000),
});

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

export const stepBody = z
  .strictObject({
    mode: z.enum(STEP_MODES).optional(),
    requestId: idSchema.optional(),
    format: z.enum(HTTP_STEP_FORMATS).optional(),
    since: sinceSchema.optional(),
  })
  .superRefine(neutralSince)
  .default({});

export const restartBody = z
  .strictObject({
    requestId: idSchema.optional(),
    format: z.enum(HTTP_STEP_FORMATS).optional(),
    since: sinceSchema.optional(),
  })
  .superRefine(neutralSince)
  .default({});

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

export const messageBody = z.strictObject({
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
});

/** `{ messages }`: an assistant turn with its tool results (or any messages), recorded in one write. */
export const messageBatchBody = z.strictObject({ messages: z.array(messageBody).min(1).max(256) });

/** `POST /sessions/:id/messages`: one message (v1), or `{ messages }`. */
export function parseMessageBody(body: unknown): { messages: z.infer<typeof messageBody>[]; batch: boolean } {
  if (typeof body === 'object' && body !== null && 'messages' in body) {
    return { messages: parseBody(messageBatchBody, body).messages, batch: true };
  }
  return { messages: [parseBody(messageBody, body)], batch: false };
}

export const toolCallBody = z.strictObject({ callId: idSchema, name: z.string().min(1).max(128) });
export const approvalBody = z.strictObject({ approved: z.boolean() });
export const answerBody = z.strictObject({ content: z.string().max(1024 * 1024) });

export const rewindBody = z
  .strictObject({ toStepId: idSchema.optional(), beforeStepId: idSchema.optional() })
  .refine(
    (b) => (b.toStepId === undefined) !== (b.beforeStepId === undefined),
    'give exactly one of toStepId, beforeStepId',
  );

export const branchBody = z.strictObject({ atStepId: idSchema.optional() }).default({});

/**
 * Parses a body, or refuses it with one message naming every problem. No body (undefined,
 * also an empty JSON body) takes the schema's default where it has one; a JSON `null` is a
 * value like any other, refused where an object is expected.
 */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  // At most MAX_ERROR_DETAILS issues are described: a body of 100,000 bad keys gets a short answer.
  const issues = parsed.error.issues.slice(0, MAX_ERROR_DETAILS);
  const message = issues.map((i) => `${i.path.length ? i.path.join('.') : 'body'}: ${i.message}`).join('; ');
  throw new CtxflowError('validation_error', message, {
    details: issues.map((i) => ({ path: i.path, message: i.message })),
  });
}
