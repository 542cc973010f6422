import { z } from 'zod';
import { idSchema } from './limits.ts';

export const STEP_MODES = ['first', 'retry', 'forced_completion'] as const;
export type StepMode = (typeof STEP_MODES)[number];

/** A step request on TOPICS.stepRequests, keyed by session id. `requestId` makes redelivery a no-op. */
export const stepRequestSchema = z.strictObject({
  requestId: idSchema,
  sessionId: idSchema,
  mode: z.enum(STEP_MODES).default('first'),
  tenant: z.string().optional(),
});
export type StepRequest = z.infer<typeof stepRequestSchema>;

/** A step request as the consumer reads it: unknown fields are accepted and kept (forward compatible). */
export const stepRequestRecordSchema = stepRequestSchema.loose();
