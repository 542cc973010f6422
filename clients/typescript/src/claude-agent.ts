import type { SDKUserMessage } from '@anthropic-ai/claude-agent-sdk';
import type { CtxflowClient } from './client.ts';
import { sleep } from './transport.ts';
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
  /** How long to wait before the next step when a step brought nothing new, in ms (default 1,000). */
  pollMs?: number;
  /** Ends the iterable (the SDK then closes its input and the query ends after the current turn). */
  signal?: AbortSignal;
  /** Called with every step answer (rows committed, cache hints). */
  onStep?: (step: NeutralStepAnswer) => void;
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
 * Claude Agent SDK integration, "rows only": the SDK keeps its own transcript and tools, ctxflow
 * delivers the session's context. An async iterable for `query({ prompt })`: each step
 * (`client.step(sessionId, { since })`) that brings new context rows or user messages becomes one
 * user turn, one text block per message in log order. The cursor (`since`) moves on only when the
 * SDK asks for the next turn, so a turn committed but not handed over comes back from the next
 * step, and an iterable started again from the acknowledged cursor repeats none. While nothing is
 * new it runs a step every `pollMs` (ticket updates become rows in a step). Turns are marked
 * `client_composed`: the CLI takes their text as written (no `@path` expansion of ticket text).
 * After a rewind below the cursor (a whole answer) the messages after what survived are handed over,
 * a row the rewind queued again among them.
 * The SDK's tool list is left as it is; a switch-off row reaches the model as its text only.
 */
export async function* ctxflowTurns(options: CtxflowTurnsOptions): AsyncGenerator<SDKUserMessage, void, undefined> {
  const { client, sessionId, signal } = options;
  const pollMs = options.pollMs ?? 1_000;
  let since = options.since ?? 0;
  while (signal?.aborted !== true) {
    let step: NeutralStepAnswer;
    try {
      step = await client.step(sessionId, { since }, signal ? { signal } : undefined);
    } catch (err) {
      if (signal?.aborted) return;
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
      try {
        await sleep(pollMs, signal);
      } catch {
        return;
      }
    }
  }
}
