import { hash } from 'node:crypto';
import type { CacheHints, ContextRow, Cursor, ModelRequest as NeutralRequest, StepMode } from '@ctxflow/contracts';
import type { LogEntry, SessionMeta, SkipReason, StepRecord, ToolDeclaration } from './model.ts';
import { NeutralWalk, renderNeutralRequest } from './neutral-request.ts';

/**
 * A step's answer (Contract v2): `request` is the neutral model request, `cache` the cache hints.
 * The v1 answer's fields keep their names and meanings; v2 only adds fields (to the messages, the
 * tools, the request and `cache`).
 */
export interface StepResult {
  stepId: string;
  mode: StepMode;
  rows: ContextRow[];
  request: NeutralRequest;
  cursor: Cursor | null;
  cache: CacheHints;
  skipped: { reason: SkipReason; message: string }[];
}

/** The step answer: the neutral format is the default (`format: 'neutral'` names it). */
export type NeutralStepResult = StepResult;

/** A step as committed (or replayed): its record, the log it covered, the declared tools and its skips. */
export interface Stepped {
  step: StepRecord;
  /** The log the step covered, from seq `logStart` on (0 when absent: the whole log). */
  log: readonly LogEntry[];
  /**
   * Where `log` starts: a pass on a log window (log-window.ts) answers only a delta whose
   * messages all are in the window.
   */
  logStart?: number;
  tools: ToolDeclaration[];
  skipped: { reason: SkipReason; message: string }[];
  /** The answer's request, when the pass rendered it already (during its commit's round trip). */
  request?: NeutralRequest;
  /** The session's cache key when it has its own (a branch keeps its origin's); else cacheKey(sessionId). */
  key?: string;
}

/** The provider cache key of a session (Contract v2 `cache.key`): stable, 40 characters. */
export function cacheKey(sessionId: string): string {
  return `ctxflow-${hash('sha256', sessionId, 'hex').slice(0, 32)}`;
}

/** A session's own cache key as a Stepped field: a branch's (kept from its origin), else none. */
export function keyOf(meta: SessionMeta): { key?: string } {
  return meta.cacheKey === undefined ? {} : { key: meta.cacheKey };
}

/**
 * The delta of a step's request for a runtime that has the first `since` messages of the session's
 * previous request: the messages from index `since` on, `since` echoed. Those `since` messages are
 * this request's first ones exactly when the prefix was not rebuilt (the system message may have
 * changed) and the previous request still has them (`previousEnd`: how many of its messages
 * survive rewinds, never more than this request has): every request is a prefix of the next (R3).
 * Otherwise the whole request with `since: 0`: the runtime replaces what it holds.
 */
export function deltaRequest(request: NeutralRequest, cache: CacheHints, since: number, logStart = 0): NeutralRequest {
  if (cache.rebuilt || since > cache.previousEnd) return { ...request, since: 0 };
  // On a log window from `logStart`, `request` holds the system message, then the window's messages.
  return { ...request, messages: request.messages.slice(since - logStart), since };
}

/**
 * Whether a step on a log window from `logStart` can answer `since`: with a delta (deltaRequest)
 * whose messages all are in the window. Otherwise the pass runs on the whole log.
 */
export function windowAnswers(step: StepRecord, logStart: number, since: number | undefined): boolean {
  if (logStart === 0) return true;
  if (since === undefined || step.cache.rebuilt || since > (step.previousEnd ?? 0)) return false;
  return since >= (step.system.length > 0 ? 1 : 0) + logStart;
}

/** The neutral model request of a step, from the walk of the log it covered. */
export function stepRequest(step: StepRecord, walk: NeutralWalk, tools: readonly ToolDeclaration[]): NeutralRequest {
  return renderNeutralRequest({
    system: step.system,
    walk,
    tools,
    activeTools: step.activeTools,
    model: step.model,
    forced: step.mode === 'forced_completion',
  });
}

/**
 * A step's answer, from the step and the log it covered: the same for a redelivered request.
 * `since`: a delta (deltaRequest).
 */
export function stepAnswer(
  sessionId: string,
  { step, log, logStart = 0, tools, skipped, request, key }: Stepped,
  since?: number,
): StepResult {
  if (!windowAnswers(step, logStart, since)) {
    throw new Error(`step ${step.stepId}: a log window from ${logStart} cannot answer since ${since}`);
  }
  const rows = log.slice(step.logStart - logStart).flatMap((e) => (e.type === 'row' ? [e.row] : []));
  const cache: CacheHints = {
    rebuilt: step.cache.rebuilt,
    reason: step.cache.reason ?? null,
    key: key ?? cacheKey(sessionId),
    prefixEnd: step.system.length > 0 ? 0 : -1,
    previousEnd: step.previousEnd ?? 0,
  };
  const full = request ?? stepRequest(step, NeutralWalk.of(log), tools);
  return {
    stepId: step.stepId,
    mode: step.mode,
    rows,
    request: since === undefined ? full : deltaRequest(full, cache, since, logStart),
    cursor: step.cursor ?? null,
    cache,
    skipped,
  };
}
