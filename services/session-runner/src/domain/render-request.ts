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
import type { LogEntry, LogFold, MessageEntry, RowEntry, ToolDeclaration } from './model.ts';
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
 * every request that contains them). The view of a log window (log-window.ts) starts at
 * the window with what its fold says of the log before it.
 */
export interface LogView {
  /** The log this view describes: the entries from seq `start` on. */
  readonly log: readonly LogEntry[];
  /** The seq of `log[0]` (0: the whole log). */
  readonly start: number;
  /** One message per log entry. */
  readonly messages: readonly ModelMessage[];
  /**
   * `bytes[i]`: bytes of the JSON of the log's first `start + i` messages inside its brackets
   * (0 for none).
   */
  readonly bytes: readonly number[];
  /** The log's `tools` rows, in log order (the active tools fold over these alone). */
  readonly toolRows: readonly RowEntry[];
  /** The cursor of the last row that carries one (R23). */
  readonly cursor: Cursor | undefined;
}

/** Where a view starts: the whole log, or a window with the fold of what is before it. */
export interface ViewOrigin {
  start: number;
  fold?: LogFold | undefined;
}

/**
 * The view of `log`, whose first entry has seq `origin.start` (by default `base`'s start, else 0).
 * `base`: the view of a log that `log` may extend (its first entries, the same objects, as
 * `base.log.concat(rows)`): then only the entries after it are rendered. Held logs only grow (a
 * rewind or a read makes new entry objects), so a log whose entry at the end of `base.log` is that
 * same object extends it.
 */
export function logView(log: readonly LogEntry[], base?: LogView, origin?: ViewOrigin): LogView {
  const start = origin?.start ?? base?.start ?? 0;
  if (base?.log === log && base.start === start) return base;
  const from =
    base !== undefined &&
    base.start === start &&
    base.log.length <= log.length &&
    (base.log.length === 0 || log[base.log.length - 1] === base.log[base.log.length - 1])
      ? base
      : undefined;
  const fold = origin?.fold;
  if (!from && start > 0 && fold?.at !== start) throw new Error(`the view of a log window at ${start} needs its fold`);
  const messages = from ? from.messages.slice() : [];
  const bytes = from ? from.bytes.slice() : [fold?.bytes ?? 0];
  let toolRows = from ? from.toolRows : (fold?.toolRows ?? []);
  let cursor = from ? from.cursor : fold?.cursor;
  let total = bytes[bytes.length - 1]!;
  for (let i = messages.length; i < log.length; i++) {
    const entry = log[i]!;
    const message = Object.freeze(renderEntry(entry));
    messages.push(message);
    total += Buffer.byteLength(JSON.stringify(message)) + (start + i > 0 ? 1 : 0);
    bytes.push(total);
    if (entry.type === 'row') {
      if (entry.row.kind === 'tools') toolRows = [...toolRows, entry];
      if (entry.row.cursor !== undefined) cursor = entry.row.cursor;
    }
  }
  return { log, start, messages, bytes, toolRows, cursor };
}

/**
 * `view.bytes` by message count: the bytes of the JSON of the log's first `count` messages. A
 * window knows them from its start on; undefined before.
 */
export function viewBytes(view: LogView, count: number): number | undefined {
  return count >= view.start ? view.bytes[count - view.start] : undefined;
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
export function requestJsonBytes(system: number, view: LogView, count = view.start + view.messages.length): number {
  const bytes = viewBytes(view, count);
  if (bytes === undefined) throw new Error(`the view of the log from ${view.start} has no size for ${count} messages`);
  return 2 + system + bytes + (system > 0 && count > 0 ? 1 : 0);
}

/** The whole model input, in order: the system prefix, then the log as stored. */
export function renderRequest(
  system: string,
  log: readonly LogEntry[] | LogView,
  tools: ToolDeclaration[],
  activeTools: string[],
): ModelRequest {
  const view = 'messages' in log ? log : logView(log);
  if (view.start > 0) throw new Error('a whole request is rendered from the whole log, not a window');
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
 * Where the walk of a log stands at its end: the messages so far (the results after the last
 * assistant message with calls held apart until the turn is over: they are sent in call order),
 * the calls of the last assistant message not yet answered.
 */
interface Walk {
  readonly log: readonly LogEntry[];
  readonly messages: RequestMessage[];
  /** callId -> [name, index in its assistant message] for the calls of the last assistant message not yet answered. */
  open: Map<string, [string, number]>;
  /** The results right after the last assistant message, with their call's index. */
  results: [number, RequestMessage][];
  afterCalls: boolean;
}

/** The walk of each log rendered (a held log's is kept with it): a log that extends one renders its new entries alone. */
const walks = new WeakMap<readonly LogEntry[], Walk>();

function extendsLog(log: readonly LogEntry[], base: readonly LogEntry[]): boolean {
  return base.length <= log.length && (base.length === 0 || log[base.length - 1] === base[base.length - 1]);
}

function walkOf(log: readonly LogEntry[], base: readonly LogEntry[] | undefined): Walk {
  const cached = walks.get(log);
  if (cached !== undefined) return cached;
  const known = base === undefined ? undefined : walks.get(base);
  const from = known !== undefined && extendsLog(log, known.log) ? known : undefined;
  const walk: Walk =
    from !== undefined
      ? {
          log,
          messages: from.messages.slice(),
          open: new Map(from.open),
          results: from.results.slice(),
          afterCalls: from.afterCalls,
        }
      : { log, messages: [], open: new Map(), results: [], afterCalls: false };
  const flush = () => {
    if (walk.results.length === 0) return;
    walk.results.sort((a, b) => a[0] - b[0]);
    for (const [, message] of walk.results) walk.messages.push(message);
    walk.results = [];
  };
  for (let i = from?.log.length ?? 0; i < log.length; i++) {
    const entry = log[i]!;
    if (entry.type === 'message' && entry.role === 'tool') {
      const call = entry.callId === undefined ? undefined : walk.open.get(entry.callId);
      if (call !== undefined) walk.open.delete(entry.callId!);
      const message = neutralMessage(entry, call?.[0]);
      if (call !== undefined && walk.afterCalls) {
        walk.results.push([call[1], message]);
        continue;
      }
      flush();
      walk.afterCalls = false;
      walk.messages.push(message);
      continue;
    }
    flush();
    walk.afterCalls = entry.type === 'message' && entry.role === 'assistant' && (entry.toolCalls?.length ?? 0) > 0;
    if (entry.type === 'message') {
      walk.open = new Map(
        entry.role === 'assistant' ? (entry.toolCalls ?? []).map((c, i) => [c.callId, [c.name, i]] as const) : [],
      );
    }
    walk.messages.push(neutralMessage(entry, undefined));
  }
  walks.set(log, walk);
  return walk;
}

/**
 * The neutral messages of a request: the system prefix, then every log entry in order. A tool message
 * carries `callId` and the name of the call it answers (a call of the last assistant message before it,
 * not answered before); context rows carry `row`. The results that follow an assistant message are
 * sent in the order of its calls: a step is refused while a call has no result (closeTurn), so they
 * are all in the log when a request first holds them. Each message depends on its entry and the
 * entries before it only, so every request is a prefix of the next (R3).
 * `base`: a log rendered before that `log` may extend (its first entries, the same objects, as
 * `base.concat(rows)`): then only the entries after it are walked.
 */
export function neutralMessages(
  system: string,
  log: readonly LogEntry[],
  base?: readonly LogEntry[],
): RequestMessage[] {
  const walk = walkOf(log, base);
  const messages: RequestMessage[] = system.length > 0 ? [{ role: 'system', content: system }] : [];
  for (const message of walk.messages) messages.push(message);
  if (walk.results.length > 0) {
    for (const [, message] of walk.results.slice().sort((a, b) => a[0] - b[0])) messages.push(message);
  }
  return messages;
}

/** The neutral model request (Contract v2) of a step. */
export function renderNeutralRequest(input: {
  system: string;
  log: readonly LogEntry[];
  /** A log rendered before that `log` extends: only its new entries are walked. */
  base?: readonly LogEntry[];
  tools: readonly ToolDeclaration[];
  activeTools: string[];
  model: string | undefined;
  forced: boolean;
}): NeutralRequest {
  const toolChoice: ToolChoice = input.forced ? { type: 'tool', name: FINISH_TOOL } : 'auto';
  return {
    messages: neutralMessages(input.system, input.log, input.base),
    tools: neutralTools(input.tools),
    activeTools: input.activeTools,
    system: input.system,
    model: input.model ?? null,
    toolChoice,
  };
}
