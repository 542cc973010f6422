/**
 * Claude Agent SDK integration, "rows only": `ctxflowTurns` (the session's new rows as the SDK's
 * user turns, waiting on the session's stream while nothing is new) and `ctxflowCanUseTool` (the
 * CLI's permission prompt answered by ctxflow's tool gate).
 */
import type { CanUseTool, PermissionResult, SDKUserMessage } from '@anthropic-ai/claude-agent-sdk';
import type { CtxflowClient } from './client.ts';
import type { StreamEvent } from './follow.ts';
import { refusalText } from './messages.ts';
import type { NeutralStepAnswer, RequestMessage } from './types.ts';

export interface CtxflowTurnsOptions {
  client: CtxflowClient;
  sessionId: string;
  /**
   * The acknowledged cursor to start from: how many of the session's request messages were handed
   * over before (the last value `onAcknowledge` received); 0, the default, for a new session.
   */
  since?: number;
  /** Called once the SDK took a turn (it asked for the next one), with the cursor to keep. */
  onAcknowledge?: (since: number) => void | Promise<void>;
  /**
   * While nothing is new, the longest wait for a stream event before a step runs anyway, in ms
   * (default 30,000): items of `POST /context` and feed (ticket) updates reach the session at a step
   * and have no stream event of their own.
   */
  idleStepMs?: number;
  /** Ends the iterable (the SDK then closes its input and the query ends after the current turn). */
  signal?: AbortSignal;
  /** Called with every step answer (rows committed, cache hints). */
  onStep?: (step: NeutralStepAnswer) => void;
  /** Called each time the iterable starts waiting (nothing new at the last step). */
  onIdle?: () => void;
}

/** What a turn hands over: the context rows and the user messages, not the system prefix nor the runtime's turns. */
function handedOver(message: RequestMessage): boolean {
  return message.row !== undefined || message.role === 'user';
}

/**
 * The messages of a step that the runtime does not hold yet, and how many it holds with them.
 * A delta answer starts at `since`; a whole answer (`request.since` 0: a rebuilt prefix, or a
 * rewind below `since`) is taken from what survived of the previous request (`cache.previousEnd`).
 */
function fresh(step: NeutralStepAnswer, since: number): { messages: RequestMessage[]; held: number } {
  const { messages } = step.request;
  if (step.request.since === since) return { messages, held: since + messages.length };
  return { messages: messages.slice(Math.min(since, step.cache.previousEnd)), held: messages.length };
}

/**
 * Whether a stream event can bring the next step something to hand over: a message other than a
 * tool result (a user message; an assistant turn, e.g. a refused call whose result the step records),
 * a rewind (it queues rows again), events a replay left out. Steps and skipped hooks come from steps.
 */
function bringsNew(event: StreamEvent): boolean {
  if (event.event === 'message') {
    const data = event.data as { role?: unknown } | null;
    return data?.role !== 'tool';
  }
  return event.event === 'rewind' || event.event === 'replay_truncated';
}

/**
 * The session's stream, read while the turns run: `idle(stepId)` resolves once an event that
 * brings something new follows the `step` event of that step (what came before it, the step saw),
 * after `ms` at the latest, or when `signal` aborts.
 */
function watch(client: CtxflowClient, sessionId: string, signal: AbortSignal) {
  /** Events read, counted; the count at the last one that brings something new; each step's own event's count. */
  let count = 0;
  let lastNew = -1;
  /** A replay left events out since the last wait: a step's own event may be among them. */
  let truncated = false;
  const stepAt = new Map<string, number>();
  let check: (() => void) | undefined;
  (async () => {
    for await (const event of client.sessions.follow(sessionId, { signal })) {
      count += 1;
      if (event.event === 'step') {
        const { stepId } = event.data as { stepId: string };
        stepAt.set(stepId, count);
      } else if (bringsNew(event)) {
        lastNew = count;
        if (event.event === 'replay_truncated') truncated = true;
      }
      check?.();
    }
  })().catch(() => {
    // A stream refused for good (the session erased, a revoked key): the steps say so; wait by time.
  });
  return {
    idle(stepId: string, ms: number): Promise<void> {
      return new Promise((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal.removeEventListener('abort', done);
          check = undefined;
          truncated = false;
          for (const id of stepAt.keys()) if (id !== stepId) stepAt.delete(id);
          resolve();
        };
        const timer = setTimeout(done, ms);
        signal.addEventListener('abort', done, { once: true });
        check = () => {
          const at = stepAt.get(stepId);
          if (at === undefined ? truncated : lastNew > at) done();
        };
        check();
      });
    },
  };
}

/**
 * An async iterable for `query({ prompt })`: each step (`client.step(sessionId, { since })`) that
 * brings new context rows or user messages becomes one user turn, one text block per message in log
 * order. The cursor (`since`) moves on only when the SDK asks for the next turn, so a turn committed
 * but not handed over comes back from the next step, and an iterable started again from the
 * acknowledged cursor repeats none. While nothing is new it follows the session's stream
 * (`client.sessions.follow`) and runs the next step when a message (not a tool result), a rewind or
 * a truncated replay comes after the last step's own event; with no such event, after `idleStepMs`.
 * Turns are marked `client_composed`: the CLI takes their text as written (no `@path` expansion of
 * ticket text). After a rewind below the cursor (a whole answer) the messages after what survived
 * are handed over, a row the rewind queued again among them.
 * The SDK's tool list is left as it is; a switch-off row reaches the model as its text only.
 */
export async function* ctxflowTurns(options: CtxflowTurnsOptions): AsyncGenerator<SDKUserMessage, void, undefined> {
  const { client, sessionId, signal } = options;
  const idleStepMs = options.idleStepMs ?? 30_000;
  let since = options.since ?? 0;
  const stop = new AbortController();
  const abort = () => stop.abort();
  signal?.addEventListener('abort', abort, { once: true });
  if (signal?.aborted) stop.abort();
  const stream = watch(client, sessionId, stop.signal);
  try {
    while (!stop.signal.aborted) {
      let step: NeutralStepAnswer;
      try {
        step = await client.step(sessionId, { since }, { signal: stop.signal });
      } catch (err) {
        if (stop.signal.aborted) return;
        throw err;
      }
      options.onStep?.(step);
      const { messages, held } = fresh(step, since);
      const texts = messages.filter(handedOver).map((m) => ({ type: 'text' as const, text: m.content }));
      if (texts.length > 0) {
        yield {
          type: 'user',
          message: { role: 'user', content: texts },
          parent_tool_use_id: null,
          client_composed: true,
        };
      }
      if (held !== since) {
        since = held;
        await options.onAcknowledge?.(since);
      }
      if (texts.length === 0) {
        options.onIdle?.();
        await stream.idle(step.stepId, idleStepMs);
      }
    }
  } finally {
    signal?.removeEventListener('abort', abort);
    stop.abort();
  }
}

export interface CtxflowCanUseToolOptions {
  client: CtxflowClient;
  sessionId: string;
  /**
   * Asks a person about a call of a tool declared with `needsApproval` (the gate answered
   * `approval_required`); the answer goes to ctxflow (`approvals.answer`), which decides. Without
   * it such a call is denied with the waiting text and its approval stays open.
   */
  approve?: (call: { callId: string; name: string; input: Record<string, unknown> }) => Promise<boolean>;
}

/**
 * The CLI's `canUseTool`: asks ctxflow's tool gate (`client.toolCalls.gate`, the call's
 * `toolUseID` as its callId) before each call the CLI asks about. An allowed call runs with its input
 * unchanged; a refused one is denied with ctxflow's refusal text (`refusalText`), and the call is
 * recorded as an assistant turn of its own, so the next step records its result (`tool_inactive`,
 * `tool_unavailable`, `approval_denied`) in the session's log, as for every adapter. A call still
 * waiting for its approval is not recorded (the session's steps would wait for it). The gate knows
 * the agent's declared tools only: declare the CLI's tools the agent may use (`Read`, `Bash`...).
 * The CLI asks only about calls its permission mode and rules do not decide: run it with
 * `permissionMode: 'default'` and `settings: { permissions: { ask: [<the tools to gate>] } }`.
 */
export function ctxflowCanUseTool(
  options: CtxflowCanUseToolOptions,
): (...args: Parameters<CanUseTool>) => Promise<PermissionResult> {
  const { client, sessionId } = options;
  return async (name, input, { signal, toolUseID }): Promise<PermissionResult> => {
    const callId = toolUseID;
    let decision = await client.toolCalls.gate(sessionId, { callId, name }, { signal });
    if (!decision.execute && decision.reason === 'approval_required' && options.approve) {
      const approved = await options.approve({ callId, name, input });
      decision = await client.approvals.answer(sessionId, callId, approved, { signal });
    }
    if (decision.execute) return { behavior: 'allow', updatedInput: input, toolUseID };
    const reason = decision.reason ?? 'tool_unavailable';
    if (reason !== 'approval_required') {
      await client.messages.create(
        sessionId,
        { role: 'assistant', content: '', toolCalls: [{ callId, name, arguments: JSON.stringify(input) }] },
        { signal },
      );
    }
    return { behavior: 'deny', message: refusalText(name, reason), toolUseID };
  };
}
