/**
 * The model request of Contract v1: the system prefix, then one message per log entry (a row in
 * its `<context>` envelope), and the byte sizes of its JSON that the step's figures report. Pure:
 * the same entries give the same bytes on every later request (R3).
 */
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

/** Bytes of the system message of `system` in a request's JSON; 0 when it has none. */
export function systemMessageBytes(system: string): number {
  if (system.length === 0) return 0;
  return Buffer.byteLength(JSON.stringify({ role: 'system', content: system }));
}

/** The whole model input, in order: the system prefix, then the messages of the log as stored. */
export function renderRequest(
  system: string,
  messages: readonly ModelMessage[],
  tools: readonly ToolDeclaration[],
  activeTools: string[],
): ModelRequest {
  return {
    messages:
      system.length > 0 ? [{ role: 'system', content: system } as ModelMessage].concat(messages) : messages.slice(),
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
