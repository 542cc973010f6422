import { z } from 'zod';
import { idSchema } from './limits.ts';

export const STEP_MODES = ['first', 'retry', 'forced_completion'] as const;
export type StepMode = (typeof STEP_MODES)[number];

/** The shape of a step answer's request: absent for v1, `neutral` for Contract v2's neutral request. */
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
