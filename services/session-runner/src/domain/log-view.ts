/**
 * The view of a log that only grows. A session's log is never changed in place: a step appends its
 * rows, an append its messages, and anything else (a rewind, a read) makes a new log. LogView is
 * that rule as a type: `LogView.of` renders a log from its first entry, and the only way to a view
 * of a longer log is `append`, which renders the appended entries alone. So a view's renderings
 * (its messages, their sizes, its `tools` rows, its cursor, its neutral walk) are always those of
 * its log, and a step's request costs its new entries, not the log.
 */
import type { Cursor, RequestMessage } from '@ctxflow/contracts';
import type { LogEntry, LogFold, RowEntry } from './model.ts';
import { type ModelMessage, renderEntry } from './model-request.ts';
import { NeutralWalk } from './neutral-request.ts';

/** Where a view starts: the whole log, or a window with the fold of what is before it. */
export interface ViewOrigin {
  start: number;
  fold?: LogFold | undefined;
}

/**
 * What requests need from a log: its rendered messages, their JSON sizes and its `tools` rows.
 * Messages are frozen (shared by every request that contains them). The view of a log window
 * (log-window.ts) starts at the window with what its fold says of the log before it.
 */
export class LogView {
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
  /**
   * The neutral walk of `log`, made when first asked for (neutral()); until then, the walk of the
   * view this one was appended to, when that one had made its own.
   */
  #walk: NeutralWalk | undefined;
  #walkOfBase: NeutralWalk | undefined;

  private constructor(
    parts: Pick<LogView, 'log' | 'start' | 'messages' | 'bytes' | 'toolRows' | 'cursor'>,
    walkOfBase: NeutralWalk | undefined,
  ) {
    this.log = parts.log;
    this.start = parts.start;
    this.messages = parts.messages;
    this.bytes = parts.bytes;
    this.toolRows = parts.toolRows;
    this.cursor = parts.cursor;
    this.#walkOfBase = walkOfBase;
  }

  /**
   * The view of `log`, whose first entry has seq `origin.start` (default 0): every entry rendered.
   * A window (start > 0) needs the fold of the log before it.
   */
  static of(log: readonly LogEntry[], origin: ViewOrigin = { start: 0 }): LogView {
    const { start, fold } = origin;
    if (start > 0 && fold?.at !== start) throw new Error(`the view of a log window at ${start} needs its fold`);
    const empty = new LogView(
      { log: [], start, messages: [], bytes: [fold?.bytes ?? 0], toolRows: fold?.toolRows ?? [], cursor: fold?.cursor },
      undefined,
    );
    return empty.append(log);
  }

  /** The view of this log followed by `entries` (their seqs continue it): only `entries` are rendered. */
  append(entries: readonly LogEntry[]): LogView {
    // An empty view takes `entries` as its log (LogView.of: the view's log is that array).
    if (entries.length === 0 && this.log.length > 0) return this;
    const messages = this.messages.slice();
    const bytes = this.bytes.slice();
    let { toolRows, cursor } = this;
    let total = bytes[bytes.length - 1]!;
    for (const entry of entries) {
      const message = Object.freeze(renderEntry(entry));
      total += Buffer.byteLength(JSON.stringify(message)) + (this.start + messages.length > 0 ? 1 : 0);
      messages.push(message);
      bytes.push(total);
      if (entry.type === 'row') {
        if (entry.row.kind === 'tools') toolRows = [...toolRows, entry];
        if (entry.row.cursor !== undefined) cursor = entry.row.cursor;
      }
    }
    const log = this.log.length === 0 ? entries : this.log.concat(entries);
    return new LogView({ log, start: this.start, messages, bytes, toolRows, cursor }, this.#walk ?? this.#walkOfBase);
  }

  /** The neutral walk of the log (neutral-request.ts): the base's walk extended by the new entries. */
  neutral(): NeutralWalk {
    if (this.#walk === undefined) {
      const base = this.#walkOfBase;
      this.#walk = base === undefined ? NeutralWalk.of(this.log) : base.extend(this.log.slice(base.length));
      this.#walkOfBase = undefined;
    }
    return this.#walk;
  }

  /** The neutral messages of a request of `system` on this log. */
  neutralMessages(system: string): RequestMessage[] {
    return this.neutral().messages(system);
  }
}

/**
 * `view.bytes` by message count: the bytes of the JSON of the log's first `count` messages. A
 * window knows them from its start on; undefined before.
 */
export function viewBytes(view: LogView, count: number): number | undefined {
  return count >= view.start ? view.bytes[count - view.start] : undefined;
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
