import type { RequestMessage } from './types.ts';

/** A tool message that answers a call of the assistant turn before it (else send it as a user turn, `orphanText`). */
export function isPairedResult(
  message: RequestMessage,
  open: ReadonlySet<string>,
): message is { role: 'tool'; content: string; callId: string; name: string } {
  return (
    message.role === 'tool' &&
    'callId' in message &&
    message.callId !== undefined &&
    open.has(message.callId) &&
    message.name !== undefined
  );
}

/** A result without its call, as the text of a user turn. */
export function orphanText(message: { content: string; callId?: string; name?: string }): string {
  return `<tool_result callId="${message.callId ?? ''}" name="${message.name ?? ''}">\n${message.content}\n</tool_result>`;
}

/** The call ids of an assistant message (empty for any other message). */
export function callsOf(message: RequestMessage): Set<string> {
  return new Set(
    message.role === 'assistant' && 'toolCalls' in message ? (message.toolCalls ?? []).map((c) => c.callId) : [],
  );
}
