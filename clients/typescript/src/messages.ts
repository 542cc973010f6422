/**
 * Reading a neutral request as a runtime sends it: what every adapter needs, once. The system prefix
 * apart from the conversation, results paired with the calls they answer, the text of a refused call,
 * the active set limited to the tools a runtime offers. No runtime's types here.
 */
import type { ModelRequest, RequestToolCall, RowRef, ToolDecision } from './types.ts';

/** The completion tool: always offered, answered by ctxflow itself (`Finished.`). */
export const FINISH_TOOL = '__finish__';

/**
 * One message of the conversation, narrowing on `role`: a context row of system form, a user turn (a context row of user form carries `row`; a result without its call comes as a
 * user turn too, `orphanText`), an assistant turn with its calls (empty when none), and a tool result
 * that answers a call of the assistant turn before it.
 */
export type ConversationMessage =
  | { role: 'system'; content: string; row?: RowRef }
  | { role: 'user'; content: string; row?: RowRef }
  | { role: 'assistant'; content: string; toolCalls: RequestToolCall[] }
  | { role: 'tool'; content: string; callId: string; name: string };

/** A request split as runtimes take it: the system prefix text and the conversation after it. */
export interface Conversation {
  /** The system prefix (agent and thread context); `""` when there is none. */
  system: string;
  messages: ConversationMessage[];
}

/** A result without its call, as the text of a user turn (providers refuse a tool message there). */
export function orphanText(message: { content: string; callId?: string; name?: string }): string {
  return `<tool_result callId="${message.callId ?? ''}" name="${message.name ?? ''}">\n${message.content}\n</tool_result>`;
}

/**
 * The request's conversation without its system prefix (the first message when `system` is not
 * empty and it is no context row): context rows where they were committed, each tool result paired
 * with the call of the assistant turn before it, and a result without such a call as a user turn.
 */
export function conversation(request: Pick<ModelRequest, 'messages' | 'system'>): Conversation {
  const messages: ConversationMessage[] = [];
  /** The calls of the last assistant turn that have no result yet. */
  let open = new Set<string>();
  request.messages.forEach((m, i) => {
    if (i === 0 && m.role === 'system' && m.row === undefined && request.system !== '') return;
    if (m.role === 'tool') {
      if (m.callId !== undefined && m.name !== undefined && open.delete(m.callId)) {
        messages.push({ role: 'tool', content: m.content, callId: m.callId, name: m.name });
      } else messages.push({ role: 'user', content: orphanText(m) });
      return;
    }
    open = new Set((m.role === 'assistant' ? (m.toolCalls ?? []) : []).map((c) => c.callId));
    if (m.role === 'assistant') messages.push({ role: 'assistant', content: m.content, toolCalls: m.toolCalls ?? [] });
    else messages.push(m.row ? { role: m.role, content: m.content, row: m.row } : { role: m.role, content: m.content });
  });
  return { system: request.system, messages };
}

/** Why the gate refused a call (`POST /sessions/:id/tool-calls` answered `execute: false`). */
export type RefusalReason = NonNullable<ToolDecision['reason']>;

/**
 * The result text of a call the gate refused, word for word the result ctxflow records for it at the
 * next step (`tool_inactive`, `tool_unavailable`, `approval_denied`), so a runtime that must hold a
 * result of its own for every call (LangChain) holds the same one. A runtime never records it:
 * ctxflow does.
 */
export function refusalText(name: string, reason: RefusalReason): string {
  switch (reason) {
    case 'tool_inactive':
      return `Not executed (tool_inactive): the tool ${name} is switched off.`;
    case 'tool_unavailable':
      return `Not executed (tool_unavailable): no tool named ${name} is offered.`;
    case 'approval_denied':
      return `Not executed (approval_denied): the call to ${name} was not approved.`;
    default:
      return `Not executed (approval_required): the call to ${name} waits for its approval.`;
  }
}

/**
 * The tools the model may call now, limited to `offered` (the names the runtime sends the model):
 * the active set, or in forced completion the completion tool only. OpenAI's `allowed_tools` refuses
 * a name its `tools` do not declare, so a runtime that offers fewer tools than the agent declares
 * sends this list, not `activeTools` as it is.
 */
export function allowedTools(
  request: Pick<ModelRequest, 'activeTools' | 'toolChoice'>,
  offered: Iterable<string>,
): { names: string[]; required: boolean } {
  const names = new Set(offered);
  const forced = typeof request.toolChoice === 'object' ? request.toolChoice.name : undefined;
  const active = forced === undefined ? request.activeTools : [forced];
  return { names: active.filter((name) => names.has(name)), required: forced !== undefined };
}

/** A call's `arguments` (the JSON text the model produced) as an object; `{}` when it is none. */
export function parseArguments(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}
