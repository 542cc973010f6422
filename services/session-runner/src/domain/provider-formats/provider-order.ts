import type { RequestMessage } from '@ctxflow/contracts';
import { quotedToolResult } from '../neutral-request.ts';

/** A tool message that answers a call of the assistant turn before it. */
export type PairedResult = { role: 'tool'; content: string; callId: string; name: string };

/** A neutral message as the formats send it: every tool message is the result of a call before it. */
export type ProviderMessage = Exclude<RequestMessage, { role: 'tool' }> | PairedResult;

/** A tool message as the neutral request has it. */
export type ToolMessage = Extract<RequestMessage, { role: 'tool' }>;

/** The user turn a result without its call becomes (providerOrder's `quote`; a memo may keep it). */
export function quotedTurn(message: ToolMessage): ProviderMessage {
  return { role: 'user' as const, content: quotedToolResult(message) };
}

/** The result of one of `pending`'s calls: a tool message with a callId still pending and a name. */
function answers(message: RequestMessage, pending: readonly string[] | undefined): message is PairedResult {
  return (
    message.role === 'tool' &&
    pending !== undefined &&
    message.callId !== undefined &&
    message.name !== undefined &&
    pending.includes(message.callId)
  );
}

/** Calls of an assistant message, or undefined when it made none. */
function callsOf(message: RequestMessage): string[] | undefined {
  if (message.role !== 'assistant' || message.toolCalls === undefined || message.toolCalls.length === 0) return;
  const ids: string[] = [];
  for (const call of message.toolCalls) ids.push(call.callId);
  return ids;
}

/** True when the messages are already in provider order: the usual case, sent with no copy. */
function inOrder(messages: readonly RequestMessage[]): messages is readonly ProviderMessage[] {
  let pending: string[] | undefined;
  for (const message of messages) {
    if (answers(message, pending)) {
      pending!.splice(pending!.indexOf(message.callId), 1);
      if (pending!.length === 0) pending = undefined;
      continue;
    }
    if (message.role === 'tool') return false; // a result without its call
    if ('row' in message) {
      if (pending !== undefined) return false; // a row between the results of a turn
      continue;
    }
    pending = callsOf(message);
  }
  return true;
}

/**
 * The neutral messages in the order every provider needs: an assistant turn's tool results
 * follow it with nothing between them, and every tool message answers a call of the turn
 * before it (the pairing the engine uses: a result answers a call of the last user or
 * assistant message before it, once).
 * - The engine may commit context rows between the results of one turn (a row a tool queued
 *   with its call): such rows move to right after the turn's last result, in their order.
 * - A tool message without its call there (recorded by a v1 client, or a client's answer to a
 *   call no assistant message made) is sent as a user turn quoting it (`quotedToolResult`),
 *   where it is, or after the turn's results when it sits between them.
 * Nothing else moves.
 *
 * Prefix safety: where a message goes depends on the messages before it and on the end of
 * its turn's results; a request never ends inside a turn's results (every call has its result
 * in the same request), so a request's order is a prefix of the next request's order.
 *
 * Returns `messages` itself when nothing moves or changes (the usual case: no copy). `quote`:
 * quotedTurn, or a memo of it.
 */
export function providerOrder(
  messages: readonly RequestMessage[],
  quote: (message: ToolMessage) => ProviderMessage = quotedTurn,
): readonly ProviderMessage[] {
  if (inOrder(messages)) return messages;
  const ordered: ProviderMessage[] = [];
  let pending: string[] | undefined;
  let held: ProviderMessage[] = [];
  const endTurn = () => {
    pending = undefined;
    for (const message of held) ordered.push(message);
    held = [];
  };
  for (const message of messages) {
    if (answers(message, pending)) {
      pending!.splice(pending!.indexOf(message.callId), 1);
      ordered.push(message);
      if (pending!.length === 0) endTurn();
      continue;
    }
    if (message.role === 'tool') {
      // A result without its call: quoted as a user turn, held while a turn's results are open.
      if (pending !== undefined) held.push(quote(message));
      else ordered.push(quote(message));
      continue;
    }
    if ('row' in message) {
      if (pending !== undefined) held.push(message);
      else ordered.push(message);
      continue;
    }
    // A user or assistant message (or the system prefix) ends the turn's results.
    if (pending !== undefined) endTurn();
    ordered.push(message);
    pending = callsOf(message);
  }
  endTurn();
  return ordered;
}
