/**
 * Use case: the context pass. The I/O around planPass (pass-plan.ts): what the pass runs on (the
 * held state or a read), the stepContext hook, memory recall, the one commit, the stream and telemetry.
 */
import { CtxflowError, type Cursor, type StepFormat, type StepMode } from '@ctxflow/contracts';
import { type PassTrace, untracedPass } from '../../ports/telemetry.ts';
import { DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT_MS, toolsOf } from '../agent-defaults.ts';
import { canonical } from '../fingerprint.ts';
import { type HookOutcome, runHook } from '../hook-batch.ts';
import { logLengthOf, logStartOf, originOf, windowOf } from '../log-window.ts';
import type { AgentRecord, SessionMeta, SessionState, StepRecord } from '../model.ts';
import { closingResults, lastUserMessage, needsRecall, type PassPlan, planPass, requestFigures } from '../pass-plan.ts';
import { logView } from '../render-request.ts';
import { keyOf, type Stepped, type StepResult, stepAnswer, stepRequest, windowAnswers } from '../step-answer.ts';
import { agentOf, type EngineContext, loadSession } from './context.ts';

/** Attempts of a pass whose commit finds the session changed since it was read. */
const PASS_ATTEMPTS = 5;

/** The ISO text of a clock reading; steps in the same millisecond share it. */
let lastIso = { ms: Number.NaN, text: '' };
function isoTime(ms: number): string {
  if (ms !== lastIso.ms) lastIso = { ms, text: new Date(ms).toISOString() };
  return lastIso.text;
}

/**
 * A model call's context pass (R2, R22): drain the queue, call the stepContext hook from the
 * stored cursor, recall memory, commit every new row in ONE store commit, then render the
 * request. A `requestId` already committed returns that step again, committing nothing (R33,
 * redelivery). The answer is Contract v2's neutral request (the default; `format: 'neutral'`
 * names it).
 */
export async function step(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  input: { mode?: StepMode; requestId?: string; format?: StepFormat; since?: number } = {},
): Promise<StepResult> {
  const mode = input.mode ?? 'first';
  const stepped = await ctx.locks.run(sessionId, () =>
    tracedPass(ctx, tenant, sessionId, mode, input.requestId, input.since),
  );
  return stepAnswer(sessionId, stepped, input.since);
}

/**
 * The pass inside the telemetry's context-pass span, when the telemetry has one. `since`: the
 * answer is a delta from there (the pass may then run on the session's log window).
 */
export function tracedPass(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  mode: StepMode,
  requestId: string | undefined,
  since: number | undefined,
): Promise<Stepped> {
  const { telemetry } = ctx;
  if (!telemetry.contextPass) return pass(ctx, tenant, sessionId, mode, requestId, since, untracedPass);
  return telemetry.contextPass({ sessionId, mode }, (trace) =>
    pass(ctx, tenant, sessionId, mode, requestId, since, trace),
  );
}

/**
 * The pass's I/O around planPass: what it runs on (held or read), the hook, memory, the one
 * commit (again on a fresh read when another write came between), then the stream and the
 * telemetry. A delta answer (`since`) lets the pass run on the session's log window; a plan the
 * window cannot answer (a rebuilt prefix, messages before the window) is made again on the
 * whole log.
 */
async function pass(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  mode: StepMode,
  requestId: string | undefined,
  since: number | undefined,
  trace: PassTrace,
): Promise<Stepped> {
  const started = performance.now();
  let linked: HookOutcome | undefined;
  let hookMemo: { cursor: Cursor | undefined; outcome: HookOutcome } | undefined;
  // A whole answer (no `since`, or 0) needs the whole log; a delta may run on the log window.
  let whole = since === undefined || since === 0;
  let replanned: { now: number; stepId: string; runId: string | undefined } | undefined;
  for (let attempt = 0; attempt < PASS_ATTEMPTS; attempt++) {
    const input = await passInput(ctx, tenant, sessionId, requestId, whole);
    if ('done' in input) return replay(ctx, input.state, input.done);
    const { state, agent } = input;
    const logStart = logStartOf(state);
    // A plan made again on the whole log keeps its step's time and ids.
    const now = replanned?.now ?? ctx.clock.now();
    const at = isoTime(now);
    const stepId = replanned?.stepId ?? ctx.ids.newId('stp');
    if (replanned === undefined) trace.step(stepId);
    const runId = state.meta.run?.open ? undefined : (replanned?.runId ?? ctx.ids.newId('run'));
    replanned = undefined;
    // Calls still waiting refuse the step before the hook is called.
    const closed = closingResults(state, now, at);

    // A held log's view is held with it: a step renders its new entries alone.
    const baseView = logView(state.log, ctx.store.heldView(sessionId), originOf(state));
    const cursor = baseView.cursor;
    let hookOutcome: HookOutcome | undefined;
    const hook = ctx.stepContextFor(agent);
    if (hook) {
      if (!hookMemo || canonical(hookMemo.cursor) !== canonical(cursor)) {
        const outcome = await runHook(
          hook,
          { sessionId, cursor, ...(state.meta.agentId === undefined ? {} : { agentId: state.meta.agentId }) },
          agent?.stepContext ?? { maxBytes: DEFAULT_MAX_BYTES, timeoutMs: DEFAULT_TIMEOUT_MS },
        );
        hookMemo = { cursor, outcome };
      }
      hookOutcome = hookMemo.outcome;
      if (hookOutcome.type === 'batch') {
        // The updates behind these rows: linked once, however often the commit is retried.
        if (linked !== hookOutcome && hookOutcome.traceparents) trace.link(hookOutcome.traceparents);
        linked = hookOutcome;
      }
    }

    let memories: string[] | undefined;
    if (agent?.memory.autoInject && needsRecall(state.log)) {
      const query = lastUserMessage(state.log);
      memories = await ctx.memory.recall({ agentId: agent.agentId, sessionId, query });
    }

    const plan = planPass({
      state,
      agent,
      mode,
      requestId,
      stepId,
      runId,
      now,
      at,
      closed,
      baseView,
      hook: hookOutcome,
      memories,
    });
    const { step, meta, rows, log, tools } = plan;
    if (!windowAnswers(step, logStart, since)) {
      // Planned again on the whole log; the hook's answer is kept (the cursor is the same).
      whole = true;
      replanned = { now, stepId, runId };
      continue;
    }
    const commit = () =>
      ctx.store.commitStep(sessionId, {
        step,
        rows: closed.length > 0 ? [...closed, ...rows] : rows,
        drain: state.queue.map((q) => q.itemId),
        expectedLogLength: logLengthOf(state),
        expectedVersion: state.version,
        meta,
        // A step that neither starts a run nor rebuilds the prefix changes only the counters.
        countersOnly: !plan.freshRun && !plan.rebuilt,
        wholeQueue: true,
      });
    const { telemetry } = ctx;
    const committing = telemetry.storeCommit
      ? telemetry.storeCommit({ sessionId, rowCount: rows.length }, commit)
      : commit();
    // While the commit's round trip runs: the answer's request and the byte figures (used
    // only if it commits). The pass's log extends the held one: only its new entries are walked.
    const request = stepRequest(step, log, tools, state.log);
    const figures = requestFigures(plan);
    const result = await committing;
    if (result.outcome !== 'committed') {
      // Another write came between the read (or the held state) and this commit; the store dropped the held state.
      if (result.outcome === 'duplicate') return replay(ctx, await loadSession(ctx, tenant, sessionId), result.step);
      continue;
    }
    const after: SessionState = {
      ...state,
      meta,
      log,
      queue: [],
      requestIds: requestId === undefined ? state.requestIds : [...state.requestIds, requestId],
      version: result.version,
    };
    // A runtime that takes deltas never needs the log before the window again: its session is
    // held as its window (log-window.ts), whatever its length.
    const held = since !== undefined && since > 0 ? windowOf(after) : after;
    ctx.store.hold(sessionId, held, held === after ? plan.view : undefined);

    // Results ctxflow recorded are messages like any other on the stream (never a row, R4).
    for (const entry of closed) {
      ctx.events.publish(sessionId, {
        type: 'message',
        seq: entry.seq,
        role: entry.role,
        content: entry.content,
        at,
      });
    }
    report(ctx, sessionId, plan, started, figures);
    return { step, log, logStart, tools, skipped: plan.skipped, request, ...keyOf(meta) };
  }
  throw new CtxflowError('state_conflict', 'the session kept changing during the context pass; send the step again');
}

/**
 * What a pass runs on. A held session is not read: the commit checks the held
 * state's version. Otherwise (or for a request the held state has committed: a
 * redelivery, or a held window when the pass needs the `whole` log) ONE round trip
 * reads the session (its log window unless `whole`), its agent (a session never
 * changes agent) and a committed request together.
 */
async function passInput(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  requestId: string | undefined,
  whole: boolean,
): Promise<{ state: SessionState; agent: AgentRecord | undefined } | { state: SessionState; done: StepRecord }> {
  const held = ctx.store.held(sessionId);
  // A request the held state knows as committed is a redelivery: answered from the store.
  const redelivered = requestId !== undefined && held?.requestIds.includes(requestId);
  if (held && held.meta.tenant === tenant && !redelivered && !(whole && logStartOf(held) > 0)) {
    return { state: held, agent: await passAgent(ctx, held.meta) };
  }
  const knownAgent = ctx.store.agentIdOf(sessionId);
  const [state, done, prefetched] = await Promise.all([
    loadSession(ctx, tenant, sessionId, { window: !whole }),
    requestId === undefined ? undefined : ctx.store.getStep(sessionId, { requestId }),
    knownAgent === undefined ? undefined : ctx.store.getAgent(knownAgent),
  ]);
  // A redelivery is answered from the whole log its step covered.
  if (done) return { state: logStartOf(state) > 0 ? await loadSession(ctx, tenant, sessionId) : state, done };
  ctx.store.hold(sessionId, state);
  return { state, agent: await passAgent(ctx, state.meta, prefetched) };
}

/**
 * The agent of a pass: read when a run starts (its context and model apply from
 * the next run, N3 N6), otherwise the agent as last read, whose tools, hook and
 * memory settings never change.
 */
async function passAgent(ctx: EngineContext, meta: SessionMeta, fresh?: AgentRecord): Promise<AgentRecord | undefined> {
  const { agentId } = meta;
  if (agentId === undefined) return undefined;
  return fresh ?? (meta.run?.open ? ctx.store.knownAgent(agentId) : undefined) ?? ctx.store.getAgent(agentId);
}

/** A step committed before: the same answer, nothing committed again. */
export async function replay(ctx: EngineContext, state: SessionState, step: StepRecord): Promise<Stepped> {
  const agent = await agentOf(ctx, state.meta);
  const log = state.log.slice(0, step.logEnd);
  // A step committed before the step record kept its model: the model of its run, if still known.
  const run = state.meta.run;
  const replayed =
    step.model === undefined && run?.runId === step.runId && run.model !== undefined
      ? { ...step, model: run.model }
      : step;
  return { step: replayed, log, tools: toolsOf(agent), skipped: [], ...keyOf(state.meta) };
}

/** A committed step on the stream and in the telemetry: its skips, then the step. */
function report(
  ctx: EngineContext,
  sessionId: string,
  { step, rows, skipped }: PassPlan,
  started: number,
  figures: { requestBytes: number; prefixReusedBytes: number },
) {
  const { telemetry, events } = ctx;
  for (const skip of skipped) {
    telemetry.contextSkipped({ sessionId, stepId: step.stepId, reason: skip.reason, message: skip.message });
    events.publish(sessionId, { type: 'context_skipped', stepId: step.stepId, ...skip, at: step.at });
  }
  events.publish(sessionId, {
    type: 'step',
    stepId: step.stepId,
    mode: step.mode,
    rowCount: rows.length,
    at: step.at,
  });
  telemetry.stepCommitted({
    sessionId,
    stepId: step.stepId,
    mode: step.mode,
    rows: rows.map((r) => ({ kind: r.row.kind, source: r.row.source })),
    durationMs: performance.now() - started,
    ...figures,
  });
}
