import type {
  ContextRow,
  Cursor,
  ModelRequest as NeutralRequest,
  RequestMessage,
  RequestTool,
  RowSource,
  ToolChoice,
} from '@ctxflow/contracts';
import { FINISH_TOOL } from '@ctxflow/contracts';
import type { LogEntry, MessageEntry, RowEntry, ToolDeclaration } from './model.ts';
import { offeredParameters } from './tool-schema.ts';

export interface ModelMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
}

export interface ModelRequest {
  messages: ModelMessage[];
  tools: { name: string; description?: string }[];
  activeTools: string[];
}

/** R6: app, hook and memory rows take a system form; tool and late-answer rows a user turn. */
const USER_FORM: ReadonlySet<RowSource> = new Set(['tool', 'late-answer']);

export function rowRole(source: RowSource): 'system' | 'user' {
  return USER_FORM.has(source) ? 'user' : 'system';
}

/** Untrusted text cannot close the envelope it is quoted in. */
function quote(text: string): string {
  return text.replaceAll('</context', '<\\/context');
}

/**
 * The one rendering of a row for the model. Deterministic: the same row gives
 * the same bytes on every later request (R3).
 */
export function renderRow(row: ContextRow): string {
  const head = `<context kind="${row.kind}" source="${row.source}">`;
  let body: string;
  if (row.kind === 'tools') {
    const lines: string[] = [];
    if (row.disable?.length) lines.push(`disabled: ${row.disable.join(', ')}`);
    if (row.enable?.length) lines.push(`enabled: ${row.enable.join(', ')}`);
    body = lines.join('\n');
  } else {
    body = quote(row.content ?? '');
  }
  return `${head}\n${body}\n</context>`;
}

export function renderEntry(entry: LogEntry): ModelMessage {
  if (entry.type === 'row') return { role: rowRole(entry.row.source), content: renderRow(entry.row) };
  return { role: entry.role, content: entry.content };
}

/**
 * What requests need from a log: its rendered messages, their JSON sizes and its `tools`
 * rows. Log entries are never changed once written and a held log is never changed in
 * place, so the log a step commits (its pass's log and the new rows) gets its view from
 * the pass's log's view, rendering the new entries alone. Messages are frozen (shared by
 * every request that contains them).
 */
export interface LogView {
  /** The log this view describes. */
  readonly log: readonly LogEntry[];
  /** One message per log entry. */
  readonly messages: readonly ModelMessage[];
  /** `bytes[i]`: bytes of the JSON of `messages.slice(0, i)` inside its brackets (`bytes[0]` is 0). */
  readonly bytes: readonly number[];
  /** The log's `tools` rows, in log order (the active tools fold over these alone). */
  readonly toolRows: readonly RowEntry[];
  /** The cursor of the last row that carries one (R23). */
  readonly cursor: Cursor | undefined;
}

/**
 * The view of `log`. `base`: the view of a log that `log` may extend (its first entries,
 * the same objects, as `base.log.concat(rows)`): then only the entries after it are
 * rendered. Held logs only grow (a rewind or a read makes new entry objects), so a log
 * whose entry at the end of `base.log` is that same object extends it.
 */
export function logView(log: readonly LogEntry[], base?: LogView): LogView {
  if (base?.log === log) return base;
  const from =
    base !== undefined &&
    base.log.length <= log.length &&
    (base.log.length === 0 || log[base.log.length - 1] === base.log[base.log.length - 1])
      ? base
      : undefined;
  const messages = from ? from.messages.slice() : [];
  const bytes = from ? from.bytes.slice() : [0];
  let toolRows = from ? from.toolRows : [];
  let cursor = from?.cursor;
  let total = bytes[bytes.length - 1]!;
  for (let i = messages.length; i < log.length; i++) {
    const entry = log[i]!;
    const message = Object.freeze(renderEntry(entry));
    messages.push(message);
    total += Buffer.byteLength(JSON.stringify(message)) + (i > 0 ? 1 : 0);
    bytes.push(total);
    if (entry.type === 'row') {
      if (entry.row.kind === 'tools') toolRows = [...toolRows, entry];
      if (entry.row.cursor !== undefined) cursor = entry.row.cursor;
    }
  }
  return { log, messages, bytes, toolRows, cursor };
}

/** Bytes of a system message's JSON, by its text (a session's prefix repeats for many steps). */
const systemBytes = new Map<string, number>();

/** Bytes of the system message of `system` in a request's JSON; 0 when it has none. */
export function systemMessageBytes(system: string): number {
  if (system.length === 0) return 0;
  let size = systemBytes.get(system);
  if (size === undefined) {
    size = Buffer.byteLength(JSON.stringify({ role: 'system', content: system }));
    if (systemBytes.size >= 1_000) systemBytes.clear();
    systemBytes.set(system, size);
  }
  return size;
}

/**
 * Bytes of `JSON.stringify(request.messages.slice(0, (system ? 1 : 0) + count))` for a
 * request of `system` (its systemMessageBytes) on a log with this view.
 */
export function requestJsonBytes(system: number, view: LogView, count = view.messages.length): number {
  return 2 + system + view.bytes[count]! + (system > 0 && count > 0 ? 1 : 0);
}

/** The whole model input, in order: the system prefix, then the log as stored. */
export function renderRequest(
  system: string,
  log: readonly LogEntry[] | LogView,
  tools: ToolDeclaration[],
  activeTools: string[],
): ModelRequest {
  const view = 'messages' in log ? log : logView(log);
  const messages: ModelMessage[] =
    system.length > 0
      ? [{ role: 'system', content: system } as ModelMessage].concat(view.messages)
      : view.messages.slice();
  return {
    messages,
    tools: tools.map((t) =>
      t.description === undefined ? { name: t.name } : { name: t.name, description: t.description },
    ),
    activeTools,
  };
}

/** Bytes of the request's messages that equal the previous request's (prompt-prefix reuse). */
export function sharedPrefixBytes(previous: string, next: string): number {
  const a = Buffer.from(previous);
  const b = Buffer.from(next);
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

// ---------------------------------------------------------------- Contract v2: the neutral request

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

/** A log entry's neutral message, cached per entry (entries never change once written). */
const neutralCache = new WeakMap<LogEntry, RequestMessage>();

function neutralMessage(entry: LogEntry, paired: string | undefined): RequestMessage {
  const cached = neutralCache.get(entry);
  if (cached !== undefined) return cached;
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
  Object.freeze(message);
  neutralCache.set(entry, message);
  return message;
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
 * The neutral messages of a request: the system prefix, then every log entry in order. A tool message
 * carries `callId` and the name of the call it answers (a call of the last assistant message before it,
 * not answered before); context rows carry `row`. The results that follow an assistant message are
 * sent in the order of its calls: a step is refused while a call has no result (closeTurn), so they
 * are all in the log when a request first holds them. Each message depends on its entry and the
 * entries before it only, so every request is a prefix of the next (R3).
 */
export function neutralMessages(system: string, log: readonly LogEntry[]): RequestMessage[] {
  const messages: RequestMessage[] = system.length > 0 ? [{ role: 'system', content: system }] : [];
  /** callId -> [name, index in its assistant message] for the calls of the last assistant message not yet answered. */
  let open = new Map<string, [string, number]>();
  /** The results right after the last assistant message, with their call's index. */
  let results: [number, RequestMessage][] = [];
  const flush = () => {
    if (results.length === 0) return;
    results.sort((a, b) => a[0] - b[0]);
    for (const [, message] of results) messages.push(message);
    results = [];
  };
  let afterCalls = false;
  for (const entry of log) {
    if (entry.type === 'message' && entry.role === 'tool') {
      const call = entry.callId === undefined ? undefined : open.get(entry.callId);
      if (call !== undefined) open.delete(entry.callId!);
      const message = neutralMessage(entry, call?.[0]);
      if (call !== undefined && afterCalls) {
        results.push([call[1], message]);
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
  flush();
  return messages;
}

/** The neutral model request (Contract v2) of a step. */
export function renderNeutralRequest(input: {
  system: string;
  log: readonly LogEntry[];
  tools: readonly ToolDeclaration[];
  activeTools: string[];
  model: string | undefined;
  forced: boolean;
}): NeutralRequest {
  const toolChoice: ToolChoice = input.forced ? { type: 'tool', name: FINISH_TOOL } : 'auto';
  return {
    messages: neutralMessages(input.system, input.log),
    tools: neutralTools(input.tools),
    activeTools: input.activeTools,
    system: input.system,
    model: input.model ?? null,
    toolChoice,
  };
}
