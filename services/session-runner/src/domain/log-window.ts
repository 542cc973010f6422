/**
 * The log window. A session's meta keeps the fold of its log before where the last step ended
 * (SessionMeta.logFold): the cursor, the `tools` rows and the view's size there. A context pass
 * answering a delta and a message append need nothing older, so they read the log from there on
 * (its window) and their cost does not grow with the log, however many steps a user turn has. For
 * an agent that recalls memory the fold is where the last request ended when the last user message
 * came, since its passes look at the rows of the user turn (R34). What needs more (a whole request,
 * a rewind, a branch, the history) reads the whole log.
 */

import { type LogView, type ViewOrigin, viewBytes } from './log-view.ts';
import type { LogEntry, LogFold, SessionState } from './model.ts';

/** The seq of the state's first log entry: 0 when it holds the whole log. */
export function logStartOf(state: Pick<SessionState, 'logStart'>): number {
  return state.logStart ?? 0;
}

/** The length of the session's log (not of the part the state holds). */
export function logLengthOf(state: Pick<SessionState, 'log' | 'logStart'>): number {
  return logStartOf(state) + state.log.length;
}

/** Where the view of the state's log starts, with the fold of what is before it. */
export function originOf(state: SessionState): ViewOrigin {
  const start = logStartOf(state);
  return start === 0 ? { start } : { start, fold: state.meta.logFold };
}

/**
 * The fold of the log before `at`, from a view whose entries from `at` on are messages. When a
 * user message is appended, the fold moves to where the last request ended (its runtime holds the
 * messages before it; what came after, its answer and the user message, a delta sends). Right
 * after a step, every call of the last assistant message has its result, so a request's messages
 * from `at` on do not depend on the entries before it. Undefined when the view starts after `at`
 * or a row follows it (no step ended there): the session is then read whole until the next user
 * message.
 */
export function foldAt(view: LogView, at: number): LogFold | undefined {
  if (at < view.start || view.log.slice(at - view.start).some((e) => e.type === 'row')) return undefined;
  const bytes = viewBytes(view, at);
  if (bytes === undefined) return undefined;
  const fold: LogFold = { at, toolRows: [...view.toolRows], bytes };
  if (view.cursor !== undefined) fold.cursor = view.cursor;
  return fold;
}

/**
 * The fold after a step that ends the log at `logEnd` (its view: `view`): there, so that the next
 * delta, which starts where this request ends, and the messages after it read nothing older.
 * Undefined for an agent that recalls memory (`recalls`): its fold moves with user messages.
 */
export function foldAfterStep(view: LogView, logEnd: number, recalls: boolean): LogFold | undefined {
  return recalls ? undefined : foldAt(view, logEnd);
}

/**
 * The `tools` rows of the session's log up to the state's end, in log order, with other entries of
 * the state between them: the whole log's for a whole state; for a window, the fold's rows of the
 * log before it, then the window. The active tools fold over `tools` rows alone (active-tools.ts),
 * so a window folds them as the whole log does.
 */
export function toolRowsOf(state: SessionState): readonly LogEntry[] {
  if (logStartOf(state) === 0) return state.log;
  const rows = state.meta.logFold?.toolRows ?? [];
  return rows.length === 0 ? state.log : [...rows, ...state.log];
}

/** The state's window: its log cut at its meta's fold when the fold is past its start. */
export function windowOf(state: SessionState): SessionState {
  const start = logStartOf(state);
  const at = state.meta.logFold?.at;
  if (at === undefined || at <= start || at > start + state.log.length) return state;
  return { ...state, log: state.log.slice(at - start), logStart: at };
}

/**
 * A window state cut at its meta's fold when the fold moved past its start (a user message was
 * appended): what a runner holds of a session read as a window stays as small as the window. A
 * state of the whole log is kept whole (a whole request needs it; a delta step holds its window).
 */
export function trimToFold(state: SessionState): SessionState {
  return logStartOf(state) === 0 ? state : windowOf(state);
}
