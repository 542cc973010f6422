import type { RequestMessage } from '@ctxflow/contracts';

/**
 * The neutral messages in the order every provider needs: an assistant turn's tool results
 * follow it with nothing between them. The engine may commit context rows between the
 * results of one turn (a row a tool queued with its call); such rows move to right after
 * the turn's last result, in their order. Nothing else moves.
 *
 * Prefix safety: a request never ends inside a turn's results (every call has its result
 * in the same request), so a turn and every row between its results are in all requests
 * that contain any of them, and a request's order is a prefix of the next request's order.
 *
 * Returns `messages` itself when nothing moves (the usual case: no copy).
 */
export function providerOrder(messages: readonly RequestMessage[]): readonly RequestMessage[] {
  let ordered: RequestMessage[] | undefined;
  /** The calls of the current turn still without a result. */
  let pending: string[] | undefined;
  let held: RequestMessage[] = [];
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    if (pending !== undefined) {
      const at = message.role === 'tool' ? pending.indexOf(message.callId) : -1;
      if (at >= 0) {
        pending.splice(at, 1);
        ordered?.push(message);
        if (pending.length === 0) {
          pending = undefined;
          if (held.length > 0) {
            ordered!.push(...held);
            held = [];
          }
        }
        continue;
      }
      if ('row' in message) {
        // A row between the results of a turn: held until the turn's last result.
        ordered ??= messages.slice(0, i);
        held.push(message);
        continue;
      }
      // Anything else ends the turn's results (a call left without a result stays so).
      pending = undefined;
      if (held.length > 0) {
        ordered!.push(...held);
        held = [];
      }
    }
    ordered?.push(message);
    if (message.role === 'assistant' && message.toolCalls !== undefined && message.toolCalls.length > 0) {
      pending = [];
      for (const call of message.toolCalls) pending.push(call.callId);
    }
  }
  if (held.length > 0) ordered!.push(...held);
  return ordered ?? messages;
}
