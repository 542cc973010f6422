/**
 * Use case: provider usage. A runtime reports what the provider said of a step's model request
 * (POST /sessions/:sessionId/steps/:stepId/usage); ctxflow keeps it beside what the step's
 * unchanged prefix predicted (provider-usage.ts) and flags a step whose provider cached less.
 */
import { CtxflowError } from '@ctxflow/contracts';
import type { RecordedUsage } from '../../ports/step-usage-store.ts';
import { predictCached, readUsage, type StepUsage, type UsageReport } from '../provider-usage.ts';
import { checkOwner, type EngineContext } from './context.ts';

/**
 * Records the report of one step, first wins: a repeat answers the first report (`recorded`
 * false) and changes nothing. Unknown session (or another tenant's): `state_session_not_found`;
 * unknown step: `state_step_not_found`; more cached or written tokens than input tokens:
 * `validation_error`. A recorded report is told to telemetry (metrics; a shortfall event).
 */
export async function reportUsage(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  stepId: string,
  report: UsageReport,
): Promise<RecordedUsage> {
  await checkOwner(ctx, tenant, sessionId);
  // Under the session's lock: an erasure in this process is not interleaved with a report.
  return ctx.locks.run(sessionId, () => record(ctx, tenant, sessionId, stepId, report));
}

async function record(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  stepId: string,
  report: UsageReport,
): Promise<RecordedUsage> {
  const step = await ctx.store.getStep(sessionId, { stepId });
  if (!step) throw new CtxflowError('state_step_not_found', `no step ${stepId} in this session`);
  const reading = readUsage(report);
  if (!reading) {
    throw new CtxflowError('validation_error', 'usage: more cached or cache-written tokens than input tokens');
  }
  const first = await ctx.usage.get(sessionId, stepId);
  if (first) return { recorded: false, usage: first };
  // The step just before this one among the surviving steps (a rewind may have cut later ones).
  const before = step.ordinal > 1 ? await ctx.store.getStep(sessionId, { ordinal: step.ordinal - 1 }) : undefined;
  const previous = before === undefined ? undefined : await ctx.usage.get(sessionId, before.stepId);
  const predictedTokens = predictCached(step, report.format, previous);
  const usage: StepUsage = {
    stepId,
    ordinal: step.ordinal,
    format: report.format,
    ...reading,
    predictedTokens,
    shortfall: predictedTokens !== null && reading.cachedTokens < predictedTokens,
    at: new Date(ctx.clock.now()).toISOString(),
  };
  const result = await ctx.usage.record(sessionId, usage);
  if (result.recorded) ctx.telemetry.providerUsage?.({ tenant, sessionId, ...result.usage });
  return result;
}
