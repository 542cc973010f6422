import type { ContextRow, Cursor, RowSource } from '@ctxflow/contracts';
import type { LogEntry, RowEntry, ToolDeclaration } from './model.ts';

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
