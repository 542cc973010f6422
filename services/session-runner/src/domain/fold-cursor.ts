import type { Cursor } from '@ctxflow/contracts';
import type { LogEntry } from './model.ts';

/** The cursor of the last batch that reached the log (R23). */
export function foldCursor(log: LogEntry[]): Cursor | undefined {
  for (let i = log.length - 1; i >= 0; i--) {
    const entry = log[i]!;
    if (entry.type === 'row' && entry.row.cursor !== undefined) return entry.row.cursor;
  }
  return undefined;
}
