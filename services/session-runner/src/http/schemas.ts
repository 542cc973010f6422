import { CtxflowError, STEP_MODES } from '@ctxflow/contracts';
import { z } from 'zod';
import { contextInputSchema } from '../domain/context-blocks.ts';

const toolDeclaration = z.strictObject({
  name: z
    .string()
    .min(1)
    .max(128)
    .regex(/^[A-Za-z0-9_.-]+$/, 'tool names use letters, digits, _ . -'),
  description: z.string().max(4096).optional(),
  client: z.boolean().optional(),
  deadlineMs: z.number().int().positive().optional(),
  needsApproval: z.boolean().optional(),
});

export const createAgentBody = z.strictObject({
  context: contextInputSchema.optional(),
  model: z.string().min(1).max(200).optional(),
  tools: z.array(toolDeclaration).max(256).optional(),
  stepContext: z
    .strictObject({
      url: z.url({ protocol: /^https?$/ }).optional(),
      maxBytes: z
        .number()
        .int()
        .min(256)
        .max(4 * 1024 * 1024)
        .optional(),
      timeoutMs: z.number().int().min(1).max(120_000).optional(),
    })
    .optional(),
  memory: z.strictObject({ autoInject: z.boolean() }).optional(),
  cacheTtlMs: z.number().int().positive().optional(),
});

export const patchAgentBody = z
  .strictObject({ context: contextInputSchema.optional(), model: z.string().min(1).max(200).optional() })
  .refine((b) => b.context !== undefined || b.model !== undefined, 'give context or model');

export const memoryBody = z.strictObject({
  content: z
    .string()
    .min(1)
    .max(32 * 1024),
});

export const createSessionBody = z.strictObject({
  agentId: z.string().min(1).optional(),
  context: contextInputSchema.optional(),
});

export const patchSessionBody = z
  .strictObject({ context: contextInputSchema.optional(), forceRefresh: z.boolean().optional() })
  .refine((b) => b.context !== undefined || b.forceRefresh !== undefined, 'give context or forceRefresh');

/** Items are validated by the domain (R9) so the messages name the item. */
export const postContextBody = z.strictObject({
  sessionId: z.string().min(1),
  items: z.array(z.unknown()).min(1).max(1000),
  key: z.string().min(1).max(256).optional(),
});

export const callContextBody = z.strictObject({
  origin: z.enum(['tool', 'hook']).default('tool'),
  site: z.string().min(1).max(256).optional(),
  items: z.array(z.unknown()).min(1).max(1000),
});

export const stepBody = z
  .strictObject({ mode: z.enum(STEP_MODES).optional(), requestId: z.string().min(1).max(200).optional() })
  .default({});

export const restartBody = z.strictObject({ requestId: z.string().min(1).max(200).optional() }).default({});

export const messageBody = z.strictObject({
  role: z.enum(['user', 'assistant', 'tool']),
  content: z.string().max(1024 * 1024),
  callId: z.string().min(1).max(200).optional(),
  toolCalls: z
    .array(z.strictObject({ callId: z.string().min(1).max(200), name: z.string().min(1).max(128) }))
    .optional(),
});

export const toolCallBody = z.strictObject({ callId: z.string().min(1).max(200), name: z.string().min(1).max(128) });
export const approvalBody = z.strictObject({ approved: z.boolean() });
export const answerBody = z.strictObject({ content: z.string().max(1024 * 1024) });

export const rewindBody = z
  .strictObject({ toStepId: z.string().min(1).optional(), beforeStepId: z.string().min(1).optional() })
  .refine(
    (b) => (b.toStepId === undefined) !== (b.beforeStepId === undefined),
    'give exactly one of toStepId, beforeStepId',
  );

export const branchBody = z.strictObject({ atStepId: z.string().min(1).optional() }).default({});

/** Parses a body, or refuses it with one message naming every problem. */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  const parsed = schema.safeParse(body ?? undefined);
  if (parsed.success) return parsed.data;
  const message = parsed.error.issues
    .map((i) => `${i.path.length ? i.path.join('.') : 'body'}: ${i.message}`)
    .join('; ');
  throw new CtxflowError('validation_error', message, {
    details: parsed.error.issues.map((i) => ({ path: i.path, message: i.message })),
  });
}
