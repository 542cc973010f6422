import type { ContextRow, RowSource } from '@ctxflow/contracts';
import type { LogEntry, ToolDeclaration } from './model.ts';

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
 * Log entries are never changed once written, so each is rendered once: a step of a
 * held session renders only its new entries. The messages are frozen (shared by
 * every request that contains them).
 */
const renderedEntries = new WeakMap<LogEntry, ModelMessage>();

function renderedEntry(entry: LogEntry): ModelMessage {
  let message = renderedEntries.get(entry);
  if (!message) {
    message = Object.freeze(renderEntry(entry));
    renderedEntries.set(entry, message);
  }
  return message;
}

const messageBytes = new WeakMap<ModelMessage, number>();

/** Bytes of `JSON.stringify(messages.slice(0, count))`, each message measured once. */
export function messagesJsonBytes(messages: readonly ModelMessage[], count = messages.length): number {
  let bytes = 2; // [ ]
  for (let i = 0; i < count; i++) {
    const message = messages[i]!;
    let size = messageBytes.get(message);
    if (size === undefined) {
      size = Buffer.byteLength(JSON.stringify(message));
      messageBytes.set(message, size);
    }
    bytes += size + (i > 0 ? 1 : 0);
  }
  return bytes;
}

/** The whole model input, in order: the system prefix, then the log as stored. */
export function renderRequest(
  system: string,
  log: LogEntry[],
  tools: ToolDeclaration[],
  activeTools: string[],
): ModelRequest {
  const messages: ModelMessage[] = [];
  if (system.length > 0) messages.push({ role: 'system', content: system });
  for (const entry of log) messages.push(renderedEntry(entry));
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
