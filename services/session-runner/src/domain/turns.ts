import { CtxflowError, FINISH_TOOL } from '@ctxflow/contracts';
import type { CallRecord, LogEntry, MessageEntry, ToolCallEntry, ToolOutcome } from './model.ts';
import { openTurn } from './neutral-request.ts';

/** A call of the last assistant message without a result, that ctxflow cannot answer yet. */
export interface PendingCall {
  callId: string;
  name: string;
  status: 'awaiting_client' | 'awaiting_approval' | 'no_result';
}

/** The text of a result ctxflow records for a call that has none of its own. */
export function outcomeText(outcome: ToolOutcome, call: { name: string; deadlineAt?: number }): string {
  switch (outcome) {
    case 'tool_inactive':
      return `Not executed (tool_inactive): the tool ${call.name} is switched off.`;
    case 'tool_unavailable':
      return `Not executed (tool_unavailable): no tool named ${call.name} is offered.`;
    case 'approval_denied':
      return `Not executed (approval_denied): the call to ${call.name} was not approved.`;
    case 'deadline_missed':
      return `No answer (deadline_missed): the client did not answer ${call.name} by its deadline ${new Date(call.deadlineAt ?? 0).toISOString()}; a later answer comes as a context notice.`;
    default:
      return 'Finished.';
  }
}

/** Why a call of the open turn has no result, by what the gate knows of it at `now`. */
function outcomeOf(
  call: ToolCallEntry,
  record: CallRecord | undefined,
  now: number,
  log: readonly LogEntry[],
): ToolOutcome | PendingCall['status'] {
  if (record?.status === 'refused') return record.reason === 'tool_unavailable' ? 'tool_unavailable' : 'tool_inactive';
  if (record?.status === 'denied') return 'approval_denied';
  if (record?.deadlineAt !== undefined && now > record.deadlineAt) {
    if (record.status === 'awaiting_client') return 'deadline_missed';
    // Answered late (a late-answer notice), or on time before its call was recorded (a tool message).
    if (record.status === 'answered') {
      const onTime = log.some((e) => e.type === 'message' && e.role === 'tool' && e.callId === call.callId);
      return onTime ? 'no_result' : 'deadline_missed';
    }
  }
  if (call.name === FINISH_TOOL) return 'finished';
  if (record?.status === 'awaiting_client' || record?.status === 'awaiting_approval') return record.status;
  return 'no_result';
}

/**
 * What closes the turn of the last assistant message (before a step, a user message or the next
 * assistant message): for each of its calls without a result, one that ctxflow records where it knows
 * why (a gate refusal, a denied approval, a missed client deadline, `__finish__`), in call order;
 * `pending` the calls that still wait (a client answer before its deadline, an approval, a result the
 * runtime has not recorded).
 */
export function closeTurn(
  log: readonly LogEntry[],
  calls: readonly CallRecord[],
  now: number,
  at: string,
): { results: Omit<MessageEntry, 'seq'>[]; pending: PendingCall[] } {
  const { assistant, answered } = openTurn(log);
  const results: Omit<MessageEntry, 'seq'>[] = [];
  const pending: PendingCall[] = [];
  for (const call of assistant?.toolCalls ?? []) {
    if (answered.has(call.callId)) continue;
    const record = calls.find((c) => c.callId === call.callId);
    const outcome = outcomeOf(call, record, now, log);
    if (outcome === 'awaiting_client' || outcome === 'awaiting_approval' || outcome === 'no_result') {
      pending.push({ callId: call.callId, name: call.name, status: outcome });
    } else {
      const content = outcomeText(outcome, {
        name: call.name,
        ...(record?.deadlineAt === undefined ? {} : { deadlineAt: record.deadlineAt }),
      });
      results.push({ type: 'message', role: 'tool', content, callId: call.callId, name: call.name, outcome, at });
    }
  }
  return { results, pending };
}

/**
 * The refusal of a step or message while calls of the last assistant message wait for their results.
 * Not retryable: sending it again helps only after a result, an answer, a deadline or an approval (a
 * step request on the bus is answered with the refusal, not redelivered).
 */
export function pendingError(pending: PendingCall[], what: string): CtxflowError {
  // details.pending names the calls: the message never quotes the caller's ids or tool names.
  const count = pending.length === 1 ? '1 call' : `${pending.length} calls`;
  return new CtxflowError(
    'state_calls_pending',
    `${what}: ${count} of the last assistant message ${pending.length === 1 ? 'has' : 'have'} no result yet (details.pending); record their results (POST /sessions/:sessionId/messages), or wait for the client's answer, its deadline or the approval, then send it again`,
    { details: { pending } },
  );
}
