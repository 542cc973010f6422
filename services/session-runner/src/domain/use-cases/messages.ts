/**
 * Use case: messages. Records the conversation's messages, closing the turn of the last assistant
 * message with the results ctxflow knows.
 */
import { CtxflowError } from '@ctxflow/contracts';
import { LogView } from '../log-view.ts';
import { foldAt, logStartOf, originOf } from '../log-window.ts';
import type {
  CallRecord,
  LogEntry,
  MessageEntry,
  MessageRole,
  SessionMeta,
  SessionState,
  ToolCallEntry,
} from '../model.ts';
import { openTurn } from '../neutral-request.ts';
import { closeTurn, pendingError } from '../turns.ts';
import { type EngineContext, loadSession, untilSettled } from './context.ts';

/** A message to record (`POST /sessions/:id/messages`). */
export interface MessageInput {
  role: MessageRole;
  content: string;
  callId?: string;
  toolCalls?: ToolCallEntry[];
}

/** One message (v1). */
export async function appendMessage(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  input: MessageInput,
): Promise<MessageEntry> {
  return (await appendMessages(ctx, tenant, sessionId, [input]))[0]!;
}

/**
 * Records messages in order, in ONE store write (an assistant turn with its tool results: no step
 * lands between them). A tool message answers a call of an earlier assistant message or one the
 * gate knows, and takes its name. A user or assistant message first closes the turn of the last
 * assistant message (closeTurn): ctxflow records the results it knows why, and refuses (409) while
 * a call still waits. A second result for a call with the same content records nothing (its entry is
 * answered); with other content it is refused. Returns the entry of each input, in order.
 */
export async function appendMessages(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  inputs: MessageInput[],
): Promise<MessageEntry[]> {
  return ctx.locks.run(sessionId, () =>
    untilSettled(
      () => recordMessages(ctx, tenant, sessionId, inputs),
      `session ${sessionId} kept changing while the messages were recorded; send them again`,
    ),
  );
}

/**
 * One attempt of appendMessages: validates the inputs against the session and appends them
 * only while the session still has that version; `conflict` (nothing written) when another
 * write came in between (another runner), to validate again on a fresh read. A held session
 * is not read (the append names its version). Only a write is checked that way: inputs the
 * held state refuses, or finds already recorded, are looked at again on a fresh read, since
 * another runner may have written (or rewound) what decides them. A session read is held.
 */
async function recordMessages(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  inputs: MessageInput[],
): Promise<MessageEntry[] | 'conflict'> {
  const now = ctx.clock.now();
  const at = new Date(now).toISOString();
  const held = ctx.cache.held(sessionId);
  const heldView = ctx.cache.heldView(sessionId);
  let state = held?.meta.tenant === tenant ? held : undefined;
  let prepared = state === undefined ? undefined : preparedOnHeld(state, inputs, now, at, heldView);
  if (state === undefined || prepared === undefined) {
    // The log window; the whole log only when the inputs need entries before it (prepareMessages).
    state = await loadSession(ctx, tenant, sessionId, { window: true });
    ctx.cache.hold(sessionId, state);
    let made = prepareMessages(state, inputs, now, at);
    if (made === 'whole') {
      state = await loadSession(ctx, tenant, sessionId);
      ctx.cache.hold(sessionId, state);
      made = prepareMessages(state, inputs, now, at) as PreparedMessages;
    }
    prepared = made;
  }
  const { next, added, answers, calls } = prepared;
  if (added.length === 0) return answers as MessageEntry[];
  const appended = await ctx.store.appendMessages(sessionId, added, next, state.version, calls);
  if (appended === 'conflict') return 'conflict';
  const stored = appended.entries as MessageEntry[];
  for (const entry of stored) {
    ctx.events.publish(sessionId, {
      type: 'message',
      seq: entry.seq,
      role: entry.role,
      content: entry.content,
      at,
    });
  }
  return answers.map((a) => (typeof a === 'number' ? stored[a]! : a));
}

/** What appending messages writes: the meta after them, the entries added, per input its entry. */
interface PreparedMessages {
  next: SessionMeta;
  added: Omit<MessageEntry, 'seq'>[];
  /** Per input: the index of its entry in `added`, or an entry already in the log. */
  answers: (number | MessageEntry)[];
  /** The call records the entries change (where the log has each call), written with them. */
  calls: CallRecord[];
}

/**
 * prepareMessages on a held state when it writes something; undefined when it refuses, writes
 * nothing or needs the log before a held window.
 */
function preparedOnHeld(state: SessionState, inputs: MessageInput[], now: number, at: string, view?: LogView) {
  try {
    const prepared = prepareMessages(state, inputs, now, at, view);
    return prepared !== 'whole' && prepared.added.length > 0 ? prepared : undefined;
  } catch (err) {
    if (err instanceof CtxflowError) return undefined;
    throw err;
  }
}

/**
 * The entries `inputs` add to `state` (closing results ctxflow records first), the meta after
 * them, per input its entry, and the call records they change; throws the refusal of an input the
 * session does not allow. A user message moves the meta's log fold to where the last request ended
 * (log-window.ts); `view`: the view of the state's log, when the caller holds one.
 *
 * On a log window, the session's call records (the last CTXFLOW_CALL_IDS_KEPT calls) stand for
 * the log before it: a call id an assistant message used (`inMessage`) is refused again, and a
 * tool message for a call before the window is checked against its record; 'whole' when that
 * record says the call may have a result there (the replay or the refusal names that entry), so
 * the caller decides on the whole log.
 */
function prepareMessages(
  state: SessionState,
  inputs: MessageInput[],
  now: number,
  at: string,
  view?: LogView,
): PreparedMessages | 'whole' {
  const next = structuredClone(state.meta);
  const start = logStartOf(state);
  const log: LogEntry[] = state.log.slice();
  const added: Omit<MessageEntry, 'seq'>[] = [];
  /** Per input: the index of its entry in `added`, or an entry already in the log. */
  const answers: (number | MessageEntry)[] = [];
  const kept = new Map(state.calls.map((c) => [c.callId, c]));
  const changed = new Map<string, CallRecord>();
  const recordOf = (callId: string) => changed.get(callId) ?? kept.get(callId);
  const push = (entry: Omit<MessageEntry, 'seq'>) => {
    const seq = start + log.length;
    added.push(entry);
    log.push({ ...entry, seq } as MessageEntry);
    // A call's first result: its record says where it is.
    const record = entry.role === 'tool' && entry.callId !== undefined ? recordOf(entry.callId) : undefined;
    if (record && record.resultSeq === undefined) changed.set(record.callId, { ...record, resultSeq: seq });
    return added.length - 1;
  };
  const usedCallIds = new Set<string>();
  for (const entry of state.log) {
    if (entry.type === 'message') for (const call of entry.toolCalls ?? []) usedCallIds.add(call.callId);
  }
  for (const [i, input] of inputs.entries()) {
    const where = inputs.length > 1 ? `messages.${i}` : 'message';
    const message: Omit<MessageEntry, 'seq'> = { type: 'message', role: input.role, content: input.content, at };
    if (input.role === 'tool') {
      if (input.callId === undefined) {
        answers.push(push(message));
        continue;
      }
      message.callId = input.callId;
      const result = resultFor(log, start, recordOf(input.callId), input.callId, where);
      if (result === 'whole') return 'whole';
      if (result.existing) {
        if (result.existing.content !== input.content) {
          throw new CtxflowError(
            'validation_error',
            `${where}: the call of callId already has a result (seq ${result.existing.seq}); a second result is refused`,
          );
        }
        answers.push(result.existing);
        continue;
      }
      message.name = result.name;
      answers.push(push(message));
      continue;
    }
    // A user or assistant message closes the turn of the last assistant message.
    const closing = closeTurn(log, state.calls, now, at);
    if (closing.pending.length > 0) throw pendingError(closing.pending, `${where} (${input.role})`);
    for (const result of closing.results) push(result);
    if (input.role === 'user' && next.run?.open) next.run.open = false; // A user turn ends the run (N3).
    if (input.callId !== undefined) message.callId = input.callId;
    if (input.toolCalls?.length) {
      for (const [j, call] of input.toolCalls.entries()) {
        const record = recordOf(call.callId);
        // Before a window, the call records know the ids assistant messages used.
        const before = start > 0 && record?.inMessage === true;
        if (usedCallIds.has(call.callId) || before) {
          throw new CtxflowError('validation_error', `${where}: toolCalls.${j}.callId is already used by another call`);
        }
        usedCallIds.add(call.callId);
        changed.set(
          call.callId,
          record
            ? { ...record, inMessage: true }
            : { callId: call.callId, name: call.name, stepIndex: next.steps, status: 'called', inMessage: true },
        );
      }
      message.toolCalls = input.toolCalls.map((c) => ({ ...c }));
    }
    answers.push(push(message));
  }
  if (next.lastRequestEnd !== undefined && added.some((e) => e.role === 'user')) {
    const base = view ?? LogView.of(state.log, originOf(state));
    const fold = foldAt(base.append(log.slice(state.log.length)), next.lastRequestEnd);
    if (fold === undefined) delete next.logFold;
    else next.logFold = fold;
  }
  return { next, added, answers, calls: [...changed.values()] };
}

/**
 * The call a tool message answers: a call of the last assistant message (its result is the first
 * tool message after it), or any other call an earlier assistant message made or the gate knows
 * (its result is any tool message for it). Refuses a callId no call has. `log` starts at seq
 * `start`; before a window (start > 0) the call's kept `record` stands for the log: 'whole' when
 * the call is there and may have a result there (an assistant message made it, or it has one).
 */
function resultFor(
  log: readonly LogEntry[],
  start: number,
  record: CallRecord | undefined,
  callId: string,
  where: string,
): { name: string; existing?: MessageEntry } | 'whole' {
  const turn = openTurn(log);
  const inTurn = turn.assistant?.toolCalls?.find((c) => c.callId === callId);
  if (inTurn) {
    const existing = turn.answered.get(callId);
    return existing ? { name: inTurn.name, existing } : { name: inTurn.name };
  }
  let name: string | undefined;
  let existing: MessageEntry | undefined;
  for (const entry of log) {
    if (entry.type !== 'message') continue;
    if (entry.role === 'tool' && entry.callId === callId) existing ??= entry;
    name ??= entry.toolCalls?.find((c) => c.callId === callId)?.name;
  }
  // A call made in the window has its result, if any, after it.
  if (start > 0 && existing === undefined && name === undefined && record !== undefined) {
    if (record.inMessage || record.resultSeq !== undefined) return 'whole';
  }
  name ??= record?.name;
  if (name === undefined) {
    throw new CtxflowError(
      'validation_error',
      `${where}: callId matches no call of an earlier assistant message and no call the gate knows`,
    );
  }
  return existing ? { name, existing } : { name };
}
