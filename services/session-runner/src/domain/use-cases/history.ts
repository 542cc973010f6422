/**
 * Use case: history. Rewinds (R28, R29), restarts of a failed run (R31) and branches (R32).
 */
import { CtxflowError, type StepFormat } from '@ctxflow/contracts';
import { foldActiveTools } from '../active-tools.ts';
import { toolsOf } from '../agent-defaults.ts';
import { foldCursor } from '../fold-cursor.ts';
import type { QueuedItem, SessionMeta } from '../model.ts';
import { cacheKey, type StepResult, stepAnswer } from '../step-answer.ts';
import { agentOf, type EngineContext, loadSession } from './context.ts';
import { replay, tracedPass } from './context-pass.ts';

/** The step a rewind or branch names, and what survives a cut at it. */
async function rewindTarget(ctx: EngineContext, sessionId: string, ref: { toStepId?: string; beforeStepId?: string }) {
  const steps = await ctx.store.listSteps(sessionId);
  const id = ref.toStepId ?? ref.beforeStepId;
  if (id === undefined) throw new CtxflowError('validation_error', 'give toStepId or beforeStepId');
  const step = steps.find((s) => s.stepId === id);
  if (!step) throw new CtxflowError('state_step_not_found', 'no such step in this session');
  const before = ref.toStepId === undefined;
  return {
    steps,
    step,
    toLength: before ? step.logStart : step.logEnd,
    /** Steps that survive. */
    keep: steps.filter((s) => (before ? s.ordinal < step.ordinal : s.ordinal <= step.ordinal)),
    /** Calls made in answer to model call `ordinal` or later are removed with it. */
    callRemoved: (call: { stepIndex: number }) => call.stepIndex >= step.ordinal,
  };
}

/**
 * R28, R29: truncates the log after a step (`toStepId`) or before it
 * (`beforeStepId`). Delivered items whose rows were cut are queued again once,
 * unless the tool call that queued them was cut too; the cursor, the active
 * tools and memory follow from what is left.
 */
export async function rewind(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  ref: { toStepId?: string; beforeStepId?: string },
) {
  return ctx.locks.run(sessionId, () => rewindLocked(ctx, tenant, sessionId, ref));
}

/** A rewind inside the session's lock (a restart rewinds, then passes, under one lock). */
async function rewindLocked(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  ref: { toStepId?: string; beforeStepId?: string },
) {
  const state = await loadSession(ctx, tenant, sessionId);
  const target = await rewindTarget(ctx, sessionId, ref);
  const removedCalls = new Set(state.calls.filter(target.callRemoved).map((c) => c.callId));
  const goesWithCall = (q: QueuedItem) => q.callId !== undefined && removedCalls.has(q.callId);
  const requeue = state.log
    .slice(target.toLength)
    .flatMap((e) => (e.type === 'row' && e.queued && !goesWithCall(e.queued) ? [e.queued] : []));
  const meta = structuredClone(state.meta);
  // The fold may cover entries the rewind removes: the session is read whole until its next user message.
  delete meta.logFold;
  meta.steps = target.keep.length;
  meta.lastRequestEnd = Math.min(meta.lastRequestEnd ?? 0, target.toLength);
  if (meta.run && meta.run.startLength > target.toLength) meta.run.open = false;
  const ok = await ctx.store.rewind(sessionId, {
    expectedLogLength: state.log.length,
    toLength: target.toLength,
    requeue,
    dropItems: state.queue.filter(goesWithCall).map((q) => q.itemId),
    dropCalls: [...removedCalls],
    dropSteps: target.steps.filter((s) => !target.keep.includes(s)).map((s) => s.stepId),
    meta,
  });
  if (!ok) throw new CtxflowError('state_conflict', 'the session changed during the rewind; send it again');
  const at = new Date(ctx.clock.now()).toISOString();
  ctx.events.publish(sessionId, { type: 'rewind', toLength: target.toLength, at });
  const after = await loadSession(ctx, tenant, sessionId);
  const agent = await agentOf(ctx, after.meta);
  return {
    logLength: after.log.length,
    requeued: requeue.length,
    queued: after.queue.length,
    cursor: foldCursor(after.log) ?? null,
    activeTools: foldActiveTools(toolsOf(agent), after.log),
  };
}

/** R31: a run that failed restarts from its start; its rows are re-made once each. */
export async function restartRun(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  input: { requestId?: string; format?: StepFormat; since?: number } = {},
): Promise<StepResult> {
  const stepped = await ctx.locks.run(sessionId, async () => {
    const state = await loadSession(ctx, tenant, sessionId);
    // A redelivered restart answers its committed step; rewinding first would cut it (R33).
    if (input.requestId !== undefined) {
      const done = await ctx.store.getStep(sessionId, { requestId: input.requestId });
      if (done) return replay(ctx, state, done);
    }
    const run = state.meta.run;
    const steps = await ctx.store.listSteps(sessionId);
    const first = run ? steps.find((s) => s.runId === run.runId) : undefined;
    if (first) await rewindLocked(ctx, tenant, sessionId, { beforeStepId: first.stepId });
    return tracedPass(ctx, { tenant, sessionId, mode: 'retry', requestId: input.requestId, since: input.since });
  });
  return stepAnswer(sessionId, stepped, input.since);
}

/** R32: a branch copies rows with their cursors and tool effects, never the queue. */
export async function branch(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  input: { atStepId?: string },
): Promise<SessionMeta> {
  return ctx.locks.run(sessionId, async () => {
    const state = await loadSession(ctx, tenant, sessionId);
    let log = state.log;
    let steps = await ctx.store.listSteps(sessionId);
    let calls = state.calls;
    let sites = state.sites;
    if (input.atStepId !== undefined) {
      const target = await rewindTarget(ctx, sessionId, { toStepId: input.atStepId });
      log = state.log.slice(0, target.toLength);
      steps = target.keep;
      calls = state.calls.filter((c) => !target.callRemoved(c));
      // As a rewind: the tool sites of calls the branch does not keep are not carried.
      const cut = new Set(state.calls.filter(target.callRemoved).map((c) => c.callId));
      sites = state.sites.filter((site) => {
        const bar = site.indexOf('|');
        return !(cut.has(site.slice(0, bar)) && site.startsWith('tool:', bar + 1));
      });
    }
    const meta: SessionMeta = {
      ...structuredClone(state.meta),
      sessionId: ctx.ids.newId('ses'),
      createdAt: new Date(ctx.clock.now()).toISOString(),
      steps: steps.length,
      branchOf: { sessionId, ...(input.atStepId === undefined ? {} : { atStepId: input.atStepId }) },
      // The branch's requests start as its origin's: the same provider cache key finds that cache.
      cacheKey: state.meta.cacheKey ?? cacheKey(sessionId),
      lastRequestEnd: Math.min(state.meta.lastRequestEnd ?? 0, log.length),
    };
    // A branch at a step may end before the fold: read whole until its next user message.
    if (meta.logFold !== undefined && meta.logFold.at > log.length) delete meta.logFold;
    if (meta.run && meta.run.startLength > log.length) meta.run.open = false;
    await ctx.store.createSession(meta, structuredClone(log), structuredClone(steps), structuredClone(calls), {
      sites: [...sites],
      itemSeq: state.itemSeq,
    });
    const agent = await agentOf(ctx, state.meta);
    await ctx.stepContextFor(agent)?.copySession?.(sessionId, meta.sessionId, meta.tenant);
    return meta;
  });
}
