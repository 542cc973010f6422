import { z } from 'zod';
import { CONTEXT_KINDS, ROW_SOURCES } from './context-items.ts';
import { idSchema } from './limits.ts';

export const STEP_MODES = ['first', 'retry', 'forced_completion'] as const;
export type StepMode = (typeof STEP_MODES)[number];

/**
 * The shape of a step answer's request. Absent: the neutral request of Contract v2 (its v1 fields
 * unchanged), which `neutral` names.
 */
export const STEP_FORMATS = ['neutral'] as const;
export type StepFormat = (typeof STEP_FORMATS)[number];

/** A step request on TOPICS.stepRequests, keyed by session id. `requestId` makes redelivery a no-op. */
export const stepRequestSchema = z.strictObject({
  requestId: idSchema,
  sessionId: idSchema,
  mode: z.enum(STEP_MODES).default('first'),
  tenant: z.string().optional(),
  format: z.enum(STEP_FORMATS).optional(),
});
export type StepRequest = z.infer<typeof stepRequestSchema>;

/** A cursor as a step result carries it: any JSON value (opaque; the hook's own). */
const wireCursorSchema = z.unknown().describe('Any JSON value: the cursor of the last hook batch, opaque.');

/** A committed context row as a step result carries it. */
export const contextRowSchema = z.looseObject({
  id: z.string(),
  role: z.literal('context'),
  kind: z.enum(CONTEXT_KINDS),
  source: z.enum(ROW_SOURCES),
  content: z.string().optional(),
  disable: z.array(z.string()).optional(),
  enable: z.array(z.string()).optional(),
  cursor: wireCursorSchema.optional(),
});

/**
 * A step result on TOPICS.stepResults, keyed by session id, header
 * `ctxflow-record-id` = `requestId`: the HTTP step answer plus the request it
 * answers (`ok: true`), or a refusal (`ok: false`). A redelivered request
 * publishes the same `stepId` again (the step committed once); consumers keep
 * the first `ok: true` result per `requestId`. A refusal whose request was
 * dead-lettered (`failed`) may be followed by an `ok: true` result once the
 * request is replayed after a fix.
 */
export const stepResultRecordSchema = z.discriminatedUnion('ok', [
  z.looseObject({
    requestId: idSchema,
    sessionId: idSchema,
    ok: z.literal(true),
    stepId: z.string(),
    mode: z.enum(STEP_MODES),
    rows: z.array(contextRowSchema),
    /** The model request of the step, as the HTTP step answer carries it (see docs/openapi). */
    request: z.record(z.string(), z.unknown()),
    cursor: wireCursorSchema,
    cache: z.looseObject({ rebuilt: z.boolean(), reason: z.string().optional() }),
    skipped: z.array(z.looseObject({ reason: z.string(), message: z.string() })),
  }),
  z.strictObject({
    requestId: idSchema,
    sessionId: idSchema,
    ok: z.literal(false),
    error: z.strictObject({ code: z.string(), message: z.string(), retryable: z.boolean() }),
  }),
]);
export type StepResultRecordWire = z.infer<typeof stepResultRecordSchema>;
