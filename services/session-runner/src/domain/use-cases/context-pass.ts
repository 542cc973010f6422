/**
 * Use case: the context pass, in three parts: what it runs on (the held state or a read:
 * passInput), its plan (the stepContext hook and memory recall it needs, then planPass in
 * pass-plan.ts, pure: what to commit), and the one commit with its retries (commitWithRetry),
 * then the stream and telemetry.
 */
import { CtxflowError, type Cursor, type StepFormat, type StepMode } from '@ctxflow/contracts';
import type { StepContextSource } from '../../ports/step-context-source.ts';
import { type PassTrace, untracedPass } from '../../ports/telemetry.ts';
import { DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT_MS, toolsOf } from '../agent-defaults.ts';
import { canonical } from '../fingerprint.ts';
import { type HookOutcome, runHook } from '../hook-batch.ts';
import { LogView } from '../log-view.ts';
import { logLengthOf, logStartOf, originOf, windowOf } from '../log-window.ts';
import type { AgentRecord, SessionMeta, SessionState, StepRecord } from '../model.ts';
import { closingResults, lastUserMessage, needsRecall, type PassPlan, planPass, requestFigures } from '../pass-plan.ts';
import { keyOf, type Stepped, type StepResult, stepAnswer, stepRequest, windowAnswers } from '../step-answer.ts';
import { agentOf, type EngineContext, loadSession } from './context.ts';

/** Commits of one pass refused because another write came between its read (or held state) and the commit. */
const CONFLICT_ATTEMPTS = 5;
/** Plans of one pass made again on the whole log because the log window could not answer its `since`. */
const WHOLE_LOG_REPLANS = 1;

/** A context pass asked for. */
export interface PassRequest {
  tenant: string;
  sessionId: string;
  mode: StepMode;
  requestId: string | undefined;
  /** The answer is a delta from there: the pass may then run on the session's log window. */
  since: number | undefined;
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
  const request: PassRequest = {
    tenant,
    sessionId,
    mode: input.mode ?? 'first',
    requestId: input.requestId,
    since: input.since,
  };
  const stepped = await ctx.locks.run(sessionId, () => tracedPass(ctx, request));
  return stepAnswer(sessionId, stepped, input.since);
}

/** The pass inside the telemetry's context-pass span, when the telemetry has one. */
export function tracedPass(ctx: EngineContext, request: PassRequest): Promise<Stepped> {
  const { telemetry } = ctx;
  if (!telemetry.contextPass) return commitWithRetry(ctx, request, untracedPass);
  return telemetry.contextPass({ sessionId: request.sessionId, mode: request.mode }, (trace) =>
    commitWithRetry(ctx, request, trace),
  );
}

/** What a pass runs on: the session (held or read), its agent and the view of its log. */
interface PassInput {
  state: SessionState;
  agent: AgentRecord | undefined;
  view: LogView;
}

/** A planned step's time and ids: a plan made again on the whole log keeps them. */
interface StepIdentity {
  now: number;
  stepId: string;
  /** The run a step starts; undefined while the session's run is open. */
  runId: string | undefined;
}

/**
 * What the pass's I/O brought that its retries reuse: the hook's answer for a cursor (the hook
 * is called again only for another cursor), and the answer whose updates the trace links (once).
 */
interface HookMemo {
  answered?: { cursor: Cursor | undefined; outcome: HookOutcome };
  linked?: HookOutcome;
}

/**
 * The pass: its input, its plan, its one commit. Two causes make it go again, each counted and
 * bounded on its own:
 * - a plan on the log window that cannot answer `since` (a rebuilt prefix, messages before the
 *   window) is made again on the whole log, keeping its step's time and ids, and the hook's
 *   answer (the cursor is the same): WHOLE_LOG_REPLANS;
 * - a commit refused because another write came between the read (or the held state) and the
 *   commit runs the pass again on a fresh read, as a new step: CONFLICT_ATTEMPTS, then a
 *   retryable `state_conflict`.
 */
async function commitWithRetry(ctx: EngineContext, request: PassRequest, trace: PassTrace): Promise<Stepped> {
  const started = performance.now();
  const hooks: HookMemo = {};
  // A whole answer (no `since`, or 0) needs the whole log; a delta may run on the log window.
  let whole = request.since === undefined || request.since === 0;
  let replans = 0;
  let conflicts = 0;
  let kept: StepIdentity | undefined;
  for (;;) {
    const input = await passInput(ctx, request, whole);
    if ('done' in input) return replay(ctx, input.state, input.done);
    const identity = stepIdentity(ctx, input.state, kept, trace);
    const plan = await planned(ctx, request, input, identity, hooks, trace);
    if (!windowAnswers(plan.step, logStartOf(input.state), request.since)) {
      // A plan on the whole log (logStart 0) answers every `since`.
      if (replans >= WHOLE_LOG_REPLANS) throw new Error(`step ${plan.step.stepId}: planned on the whole log again`);
      replans += 1;
      whole = true;
      kept = identity;
      continue;
    }
    const result = await committed(ctx, request, input.state, plan, started);
    if (result.outcome === 'committed') return result.stepped;
    if (result.outcome === 'duplicate') {
      return replay(ctx, await loadSession(ctx, request.tenant, request.sessionId), result.step);
    }
    conflicts += 1;
    if (conflicts >= CONFLICT_ATTEMPTS) {
      throw new CtxflowError(
        'state_conflict',
        'the session kept changing during the context pass; send the step again',
      );
    }
    kept = undefined;
  }
}

/** The time and ids of the step a pass plans on `state`: new ones, or those `kept` of a plan made again. */
function stepIdentity(
  ctx: EngineContext,
  state: SessionState,
  kept: StepIdentity | undefined,
  trace: PassTrace,
): StepIdentity {
  const now = kept?.now ?? ctx.clock.now();
  const stepId = kept?.stepId ?? ctx.ids.newId('stp');
  if (kept === undefined) trace.step(stepId);
  const runId = state.meta.run?.open ? undefined : (kept?.runId ?? ctx.ids.newId('run'));
  return { now, stepId, runId };
}

/**
 * The plan of a pass on its input: the closing results (calls still waiting refuse the step
 * before the hook is called), the hook's batch from the cursor of the log and the recalled
 * memory (I/O), then planPass (pure: what the one commit writes).
 */
async function planned(
  ctx: EngineContext,
  request: PassRequest,
  { state, agent, view }: PassInput,
  { now, stepId, runId }: StepIdentity,
  hooks: HookMemo,
  trace: PassTrace,
): Promise<PassPlan> {
  const at = new Date(now).toISOString();
  const closed = closingResults(state, now, at);
  const source = ctx.stepContextFor(agent);
  // No hook, no await: a step of an agent without one goes on at once.
  const hook = source && (await hookOutcome(source, request.sessionId, state.meta, agent, view.cursor, hooks, trace));
  let memories: string[] | undefined;
  if (agent?.memory.autoInject && needsRecall(state.log)) {
    const query = lastUserMessage(state.log);
    memories = await ctx.memory.recall({ agentId: agent.agentId, sessionId: request.sessionId, query });
  }
  return planPass({
    state,
    agent,
    mode: request.mode,
    requestId: request.requestId,
    stepId,
    runId,
    now,
    at,
    closed,
    baseView: view,
    hook,
    memories,
  });
}

/** The answer of the agent's stepContext hook (`source`) from `cursor`, once per cursor. */
async function hookOutcome(
  source: StepContextSource,
  sessionId: string,
  meta: SessionMeta,
  agent: AgentRecord | undefined,
  cursor: Cursor | undefined,
  hooks: HookMemo,
  trace: PassTrace,
): Promise<HookOutcome> {
  if (!hooks.answered || canonical(hooks.answered.cursor) !== canonical(cursor)) {
    const outcome = await runHook(
      source,
      { sessionId, cursor, ...(meta.agentId === undefined ? {} : { agentId: meta.agentId }) },
      agent?.stepContext ?? { maxBytes: DEFAULT_MAX_BYTES, timeoutMs: DEFAULT_TIMEOUT_MS },
    );
    hooks.answered = { cursor, outcome };
  }
  const { outcome } = hooks.answered;
  if (outcome.type === 'batch') {
    // The updates behind these rows: linked once, however often the commit is retried.
    if (hooks.linked !== outcome && outcome.traceparents) trace.link(outcome.traceparents);
    hooks.linked = outcome;
  }
  return outcome;
}

/**
 * The plan's one commit. Committed: the state it made is held, the results ctxflow recorded and
 * the step go on the stream and to the telemetry, and the step's answer is made of it (its request
 * rendered during the commit's round trip). Refused (`conflict`): the store dropped the held state.
 */
async function committed(
  ctx: EngineContext,
  request: PassRequest,
  state: SessionState,
  plan: PassPlan,
  started: number,
): Promise<
  { outcome: 'committed'; stepped: Stepped } | { outcome: 'duplicate'; step: StepRecord } | { outcome: 'conflict' }
> {
  const { sessionId, requestId, since } = request;
  const { step, meta, rows, closed, log, tools } = plan;
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
  // While the commit's round trip runs: the answer's request and the byte figures (used only if it
  // commits). The pass's view extends the one it ran on: only its new entries are walked.
  const answer = stepRequest(step, plan.view.neutral(), tools);
  const figures = requestFigures(plan, ctx.systemBytes);
  const result = await committing;
  if (result.outcome !== 'committed') return result;
  const after: SessionState = {
    ...state,
    meta,
    // The view's own log: held with it (a held log is replaced, never changed in place).
    log: log as SessionState['log'],
    queue: [],
    requestIds: requestId === undefined ? state.requestIds : [...state.requestIds, requestId],
    version: result.version,
  };
  // A runtime that takes deltas never needs the log before the window again: its session is
  // held as its window (log-window.ts), whatever its length.
  const held = since !== undefined && since > 0 ? windowOf(after) : after;
  ctx.cache.hold(sessionId, held, held === after ? plan.view : undefined);

  // Results ctxflow recorded are messages like any other on the stream (never a row, R4).
  for (const entry of closed) {
    ctx.events.publish(sessionId, {
      type: 'message',
      seq: entry.seq,
      role: entry.role,
      content: entry.content,
      at: step.at,
    });
  }
  report(ctx, sessionId, plan, started, figures);
  const stepped: Stepped = {
    step,
    log,
    logStart: logStartOf(state),
    tools,
    skipped: plan.skipped,
    request: answer,
    ...keyOf(meta),
  };
  return { outcome: 'committed', stepped };
}

/**
 * What a pass runs on. A held session is not read: the commit checks the held
 * state's version. Otherwise (or for a request the held state has committed: a
 * redelivery, or a held window when the pass needs the `whole` log) ONE round trip
 * reads the session (its log window unless `whole`), its agent (a session never
 * changes agent) and a committed request together. The state read is held with its view.
 */
async function passInput(
  ctx: EngineContext,
  { tenant, sessionId, requestId }: PassRequest,
  whole: boolean,
): Promise<PassInput | { state: SessionState; done: StepRecord }> {
  const held = ctx.cache.held(sessionId);
  // A request the held state knows as committed is a redelivery: answered from the store.
  const redelivered = requestId !== undefined && held?.requestIds.includes(requestId);
  if (held && held.meta.tenant === tenant && !redelivered && !(whole && logStartOf(held) > 0)) {
    // A held log's view is held with it: a step renders its new entries alone.
    const view = ctx.cache.heldView(sessionId) ?? LogView.of(held.log, originOf(held));
    return { state: held, agent: await passAgent(ctx, held.meta), view };
  }
  const knownAgent = ctx.cache.agentIdOf(sessionId);
  const [state, done, prefetched] = await Promise.all([
    loadSession(ctx, tenant, sessionId, { window: !whole }),
    requestId === undefined ? undefined : ctx.store.getStep(sessionId, { requestId }),
    knownAgent === undefined ? undefined : ctx.store.getAgent(knownAgent),
  ]);
  // A redelivery is answered from the whole log its step covered.
  if (done) return { state: logStartOf(state) > 0 ? await loadSession(ctx, tenant, sessionId) : state, done };
  const view = LogView.of(state.log, originOf(state));
  ctx.cache.hold(sessionId, state, view);
  return { state, agent: await passAgent(ctx, state.meta, prefetched), view };
}

/**
 * The agent of a pass: read when a run starts (its context and model apply from
 * the next run, N3 N6), otherwise the agent as last read, whose tools, hook and
 * memory settings never change.
 */
async function passAgent(ctx: EngineContext, meta: SessionMeta, fresh?: AgentRecord): Promise<AgentRecord | undefined> {
  const { agentId } = meta;
  if (agentId === undefined) return undefined;
  return fresh ?? (meta.run?.open ? ctx.cache.knownAgent(agentId) : undefined) ?? ctx.store.getAgent(agentId);
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
