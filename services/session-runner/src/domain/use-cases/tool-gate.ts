/**
 * Use case: the tool gate. Decides each tool call (R17, R20), answers approvals (R21) and client
 * tools' answers (R35).
 */
import { CtxflowError, FINISH_TOOL, MAX_DEADLINE_MS, type SourcedItem, validateItems } from '@ctxflow/contracts';
import { foldActiveTools } from '../active-tools.ts';
import { DEFAULT_CLIENT_DEADLINE_MS, toolsOf } from '../agent-defaults.ts';
import { lateAnswerContent } from '../late-answer.ts';
import { logLengthOf, toolRowsOf } from '../log-window.ts';
import type { CallRecord, ToolDeclaration } from '../model.ts';
import { openTurn } from '../neutral-request.ts';
import { agentOf, type EngineContext, loadSession, untilSettled } from './context.ts';

/** The last instant a JavaScript Date holds (ECMA-262 "Time Values and Time Range"). */
const LAST_DATE_MS = 8.64e15;

/** The gate's answer to a call: run it (a client tool by its deadline), or why not. */
export type ToolDecision =
  | { execute: true; client?: true; deadlineAt?: string }
  | { execute: false; reason: 'tool_inactive' | 'tool_unavailable' | 'approval_required' | 'approval_denied' };

/** The decision a call record stands for (a repeated callId gets the same one). */
function decisionOf(call: CallRecord): ToolDecision {
  switch (call.status) {
    case 'executed':
    case 'answered':
      return { execute: true };
    case 'awaiting_client':
      // A record written before deadlines had a maximum may lie past the last date a Date holds.
      return {
        execute: true,
        client: true,
        deadlineAt: new Date(Math.min(call.deadlineAt ?? 0, LAST_DATE_MS)).toISOString(),
      };
    case 'awaiting_approval':
      return { execute: false, reason: 'approval_required' };
    case 'denied':
      return { execute: false, reason: 'approval_denied' };
    default:
      return { execute: false, reason: (call.reason ?? 'tool_inactive') as 'tool_inactive' | 'tool_unavailable' };
  }
}

/**
 * R17, R20: the tool gate. A repeated callId gets the same decision. It reads the session's log
 * window (log-window.ts): the active tools fold over the fold's `tools` rows and the window's, and
 * the call records are the session's kept ones (request-retention.ts), so its cost does not grow
 * with the log.
 */
export async function gateToolCall(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  input: { callId: string; name: string },
): Promise<ToolDecision> {
  return ctx.locks.run(sessionId, async () => {
    const state = await loadSession(ctx, tenant, sessionId, { window: true });
    const existing = state.calls.find((c) => c.callId === input.callId);
    if (existing && existing.status !== 'called') return decisionOf(existing);
    const agent = await agentOf(ctx, state.meta);
    const tools = toolsOf(agent);
    const declared = tools.find((t) => t.name === input.name);
    const call: CallRecord = {
      callId: input.callId,
      name: input.name,
      stepIndex: state.meta.steps,
      status: 'executed',
      // What the record of a call an assistant message made says of the log stays.
      ...(existing?.inMessage ? { inMessage: true } : {}),
      ...(existing?.resultSeq === undefined ? {} : { resultSeq: existing.resultSeq }),
    };
    if (!declared) {
      call.status = 'refused';
      call.reason = 'tool_unavailable';
    } else if (!foldActiveTools(tools, toolRowsOf(state)).includes(input.name)) {
      call.status = 'refused';
      call.reason = 'tool_inactive';
    } else if (declared.needsApproval && declared.name !== FINISH_TOOL) {
      call.status = 'awaiting_approval';
    } else if (declared.client) {
      call.status = 'awaiting_client';
      call.deadlineAt = deadline(ctx, declared);
    }
    // The answer is built before the record is written: a failure leaves nothing behind.
    const decision = decisionOf(call);
    await ctx.store.putCall(sessionId, call);
    return decision;
  });
}

/**
 * When a client tool's answer is due: its declared deadline (at most
 * MAX_DEADLINE_MS, also for an agent stored before that limit) from now.
 */
function deadline(ctx: EngineContext, declared: ToolDeclaration | undefined): number {
  return ctx.clock.now() + Math.min(declared?.deadlineMs ?? DEFAULT_CLIENT_DEADLINE_MS, MAX_DEADLINE_MS);
}

/**
 * R21: an approval answers "may this call run", not "override the switch":
 * a switch-off in the log or still queued refuses it. Read as the gate reads (the log window).
 */
export async function answerApproval(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  callId: string,
  approved: boolean,
): Promise<ToolDecision> {
  return ctx.locks.run(sessionId, async () => {
    const state = await loadSession(ctx, tenant, sessionId, { window: true });
    const call = state.calls.find((c) => c.callId === callId);
    if (!call || call.status === 'called')
      throw new CtxflowError('state_call_not_found', 'no such call in this session');
    if (call.status !== 'awaiting_approval') return decisionOf(call);
    const agent = await agentOf(ctx, state.meta);
    const tools = toolsOf(agent);
    const next: CallRecord = { ...call };
    if (!approved) {
      next.status = 'denied';
    } else if (!foldActiveTools(tools, toolRowsOf(state), state.queue).includes(call.name)) {
      next.status = 'refused';
      next.reason = 'tool_inactive';
    } else if (tools.find((t) => t.name === call.name)?.client) {
      next.status = 'awaiting_client';
      next.deadlineAt = deadline(
        ctx,
        tools.find((t) => t.name === call.name),
      );
    } else {
      next.status = 'executed';
    }
    const decision = decisionOf(next);
    await ctx.store.putCall(sessionId, next);
    return decision;
  });
}

/** R35: a client tool's answer; after its deadline it becomes a late-answer notice. */
export async function answerClientCall(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  callId: string,
  content: string,
): Promise<{ late: boolean; recorded: number }> {
  return ctx.locks.run(sessionId, () =>
    untilSettled(
      () => recordClientAnswer(ctx, tenant, sessionId, callId, content),
      `session ${sessionId} kept changing while the answer was recorded; send it again`,
    ),
  );
}

/**
 * One attempt of answerClientCall. An on-time answer is recorded only while the session has
 * the version it was checked on (no result of the runtime came in between); `conflict`
 * (nothing written) otherwise.
 */
async function recordClientAnswer(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  callId: string,
  content: string,
): Promise<{ late: boolean; recorded: number } | 'conflict'> {
  const state = await loadSession(ctx, tenant, sessionId);
  const call = state.calls.find((c) => c.callId === callId);
  if (!call || (call.status !== 'awaiting_client' && call.status !== 'answered')) {
    throw new CtxflowError('state_call_not_found', 'the call is not waiting for a client answer');
  }
  if (call.status === 'answered') return { late: false, recorded: 0 };
  const now = ctx.clock.now();
  const at = new Date(now).toISOString();
  const late = now > (call.deadlineAt ?? Number.POSITIVE_INFINITY);
  if (late) {
    const item: SourcedItem = {
      kind: 'notice',
      source: 'late-answer',
      content: lateAnswerContent(call.name, callId, content),
    };
    validateItems([{ kind: item.kind, content: item.content }], 'app');
    await ctx.store.enqueue(sessionId, [{ item, at }], {
      type: 'site',
      callId,
      site: 'late-answer',
    });
  } else {
    // A result the runtime already recorded for this call stays the only one.
    const turn = openTurn(state.log);
    const answered = turn.assistant?.toolCalls?.some((c) => c.callId === callId)
      ? turn.answered.has(callId)
      : state.log.some((e) => e.type === 'message' && e.role === 'tool' && e.callId === callId);
    if (answered) {
      await ctx.store.putCall(sessionId, { ...call, status: 'answered' });
      return { late: false, recorded: 0 };
    }
    // The answer and its call's record in one write (the result is the log's next entry).
    const appended = await ctx.store.appendMessages(
      sessionId,
      [{ type: 'message', role: 'tool', content, callId, name: call.name, at }],
      undefined,
      state.version,
      [{ ...call, status: 'answered', resultSeq: call.resultSeq ?? logLengthOf(state) }],
    );
    return appended === 'conflict' ? 'conflict' : { late, recorded: 1 };
  }
  await ctx.store.putCall(sessionId, { ...call, status: 'answered' });
  return { late, recorded: 1 };
}
