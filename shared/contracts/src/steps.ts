import { z } from 'zod';

export const STEP_MODES = ['first', 'retry', 'forced_completion'] as const;
export type StepMode = (typeof STEP_MODES)[number];

/** A step request on TOPICS.stepRequests, keyed by session id. `requestId` makes redelivery a no-op. */
export const stepRequestSchema = z.strictObject({
  requestId: z.string().min(1).max(200),
  sessionId: z.string().min(1),
  mode: z.enum(STEP_MODES).default('first'),
  tenant: z.string().optional(),
});
export type StepRequest = z.infer<typeof stepRequestSchema>;
