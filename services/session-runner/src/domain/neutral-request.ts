/**
 * The neutral model request of Contract v2: the system prefix, then every log entry in order, tool
 * results with the call they answer, context rows with their `row`. NeutralWalk renders a log that
 * only grows: a longer log's walk extends the shorter one's, rendering its new entries alone.
 */
import type { ModelRequest as NeutralRequest, RequestMessage, RequestTool, ToolChoice } from '@ctxflow/contracts';
import { FINISH_TOOL } from '@ctxflow/contracts';
import type { LogEntry, MessageEntry, ToolDeclaration } from './model.ts';
import { renderRow, rowRole } from './model-request.ts';
import { offeredParameters } from './tool-schema.ts';

/** The tools as offered to the model: declared fields only, `parameters` unchanged, `__finish__`'s filled in. */
export function neutralTools(tools: readonly ToolDeclaration[]): RequestTool[] {
  return tools.map((t) => {
    const tool: RequestTool = { name: t.name };
    if (t.description !== undefined) tool.description = t.description;
    const parameters = offeredParameters(t);
    if (parameters !== undefined) tool.parameters = parameters as Record<string, unknown>;
    if (t.strict !== undefined) tool.strict = t.strict;
    return tool;
  });
}

/** Untrusted text cannot close the envelope it is quoted in. */
function quoteResult(text: string): string {
  return text.replaceAll('</tool_result', '<\\/tool_result');
}

/**
 * A tool message whose call is not in the assistant turn before it, as the user turn a provider
 * accepts there (providers refuse a tool message without its call):
 * `<tool_result callId="..." name="...">\n<content>\n</tool_result>`.
 */
export function quotedToolResult(message: { content: string; callId?: string; name?: string }): string {
  const call = message.callId === undefined ? '' : ` callId="${message.callId}"`;
  const name = message.name === undefined ? '' : ` name="${message.name}"`;
  return `<tool_result${call}${name}>\n${quoteResult(message.content)}\n</tool_result>`;
}

/** A log entry's neutral message (frozen: shared by every request that contains it). */
function neutralMessage(entry: LogEntry, paired: string | undefined): RequestMessage {
  let message: RequestMessage;
  if (entry.type === 'row') {
    const { id, kind, source } = entry.row;
    message = { role: rowRole(source), content: renderRow(entry.row), row: { id, kind, source } };
  } else if (entry.role === 'assistant') {
    message = entry.toolCalls?.length
      ? {
          role: 'assistant',
          content: entry.content,
          toolCalls: entry.toolCalls.map((c) => ({ callId: c.callId, name: c.name, arguments: c.arguments ?? '{}' })),
        }
      : { role: 'assistant', content: entry.content };
  } else if (entry.role === 'tool' && paired !== undefined) {
    message = { role: 'tool', content: entry.content, callId: entry.callId!, name: paired };
  } else if (entry.role === 'tool') {
    // A result no call of the turn before it asked for (recorded by a v1 client, or a client's answer
    // to a call the gate knows and no assistant message made): as recorded, with what is known of its
    // call (the v1 message, fields added). Provider formats quote it in a user turn (quotedToolResult).
    message = {
      role: 'tool',
      content: entry.content,
      ...(entry.callId === undefined ? {} : { callId: entry.callId }),
      ...(entry.name === undefined ? {} : { name: entry.name }),
    };
  } else {
    message = { role: 'user', content: entry.content };
  }
  return Object.freeze(message);
}

/**
 * The calls of the last assistant message of `log` still without a result, in call order, and the
 * results they have. A result answers a call of the last user or assistant message before it, once.
 */
export function openTurn(log: readonly LogEntry[]): {
  assistant: MessageEntry | undefined;
  answered: Map<string, MessageEntry>;
} {
  for (let i = log.length - 1; i >= 0; i--) {
    const entry = log[i]!;
    if (entry.type !== 'message' || entry.role === 'tool') continue;
    if (entry.role === 'user' || !entry.toolCalls?.length) return { assistant: undefined, answered: new Map() };
    const answered = new Map<string, MessageEntry>();
    const calls = new Set(entry.toolCalls.map((c) => c.callId));
    for (let j = i + 1; j < log.length; j++) {
      const e = log[j]!;
      if (e.type === 'message' && e.role === 'tool' && e.callId !== undefined && calls.has(e.callId)) {
        if (!answered.has(e.callId)) answered.set(e.callId, e);
      }
    }
    return { assistant: entry, answered };
  }
  return { assistant: undefined, answered: new Map() };
}

/**
 * The walk of a log: where the rendering of its entries, in order, stands at its end. The only
 * way to a walk of a longer log is `extend` with the entries that follow, so a walk is always the
 * walk of its entries from the first on, and a step's log (the log it ran on and its new rows)
 * renders its new entries alone. Walks are never changed: `extend` makes a new one.
 */
export class NeutralWalk {
  /** The walk of `log`, from its first entry. */
  static of(log: readonly LogEntry[]): NeutralWalk {
    return new NeutralWalk(0, [], new Map(), [], false).extend(log);
  }

  /** Entries walked. */
  readonly length: number;
  /**
   * The messages so far, the results after the last assistant message with calls held apart until
   * the turn is over (they are sent in call order).
   */
  readonly #messages: readonly RequestMessage[];
  /** callId -> [name, index in its assistant message] for the calls of the last assistant message not yet answered. */
  readonly #open: ReadonlyMap<string, readonly [string, number]>;
  /** The results right after the last assistant message, with their call's index, in call order. */
  readonly #results: readonly (readonly [number, RequestMessage])[];
  readonly #afterCalls: boolean;

  private constructor(
    length: number,
    messages: readonly RequestMessage[],
    open: ReadonlyMap<string, readonly [string, number]>,
    results: readonly (readonly [number, RequestMessage])[],
    afterCalls: boolean,
  ) {
    this.length = length;
    this.#messages = messages;
    this.#open = open;
    this.#results = results;
    this.#afterCalls = afterCalls;
  }

  /** The walk of this walk's entries followed by `entries`: only `entries` are rendered. */
  extend(entries: readonly LogEntry[]): NeutralWalk {
    if (entries.length === 0) return this;
    const messages = this.#messages.slice();
    let open = new Map(this.#open);
    let results = this.#results.slice();
    let afterCalls = this.#afterCalls;
    const flush = () => {
      if (results.length === 0) return;
      for (const [, message] of results) messages.push(message);
      results = [];
    };
    for (const entry of entries) {
      if (entry.type === 'message' && entry.role === 'tool') {
        const call = entry.callId === undefined ? undefined : open.get(entry.callId);
        if (call !== undefined) open.delete(entry.callId!);
        const message = neutralMessage(entry, call?.[0]);
        if (call !== undefined && afterCalls) {
          results.push([call[1], message]);
          results.sort((a, b) => a[0] - b[0]);
          continue;
        }
        flush();
        afterCalls = false;
        messages.push(message);
        continue;
      }
      flush();
      afterCalls = entry.type === 'message' && entry.role === 'assistant' && (entry.toolCalls?.length ?? 0) > 0;
      if (entry.type === 'message') {
        open = new Map(
          entry.role === 'assistant' ? (entry.toolCalls ?? []).map((c, i) => [c.callId, [c.name, i]] as const) : [],
        );
      }
      messages.push(neutralMessage(entry, undefined));
    }
    return new NeutralWalk(this.length + entries.length, messages, open, results, afterCalls);
  }

  /**
   * The neutral messages of a request: the system prefix, then every entry walked. A tool message
   * carries `callId` and the name of the call it answers (a call of the last assistant message before
   * it, not answered before); context rows carry `row`. The results that follow an assistant message
   * are sent in the order of its calls: a step is refused while a call has no result (closeTurn), so
   * they are all in the log when a request first holds them. Each message depends on its entry and
   * the entries before it only, so every request is a prefix of the next (R3).
   */
  messages(system: string): RequestMessage[] {
    const messages: RequestMessage[] = system.length > 0 ? [{ role: 'system', content: system }] : [];
    for (const message of this.#messages) messages.push(message);
    for (const [, message] of this.#results) messages.push(message);
    return messages;
  }
}

/** The neutral messages of a request of `system` on `log` (NeutralWalk.messages), walked whole. */
export function neutralMessages(system: string, log: readonly LogEntry[]): RequestMessage[] {
  return NeutralWalk.of(log).messages(system);
}

/** The neutral model request (Contract v2) of a step, from the walk of the log it covered. */
export function renderNeutralRequest(input: {
  system: string;
  walk: NeutralWalk;
  tools: readonly ToolDeclaration[];
  activeTools: string[];
  model: string | undefined;
  forced: boolean;
}): NeutralRequest {
  const toolChoice: ToolChoice = input.forced ? { type: 'tool', name: FINISH_TOOL } : 'auto';
  return {
    messages: input.walk.messages(input.system),
    tools: neutralTools(input.tools),
    activeTools: input.activeTools,
    system: input.system,
    model: input.model ?? null,
    toolChoice,
  };
}
