import type { StepUsage } from '../domain/provider-usage.ts';

/** What a usage report did: recorded it, or found the step's first report (which stays). */
export interface RecordedUsage {
  recorded: boolean;
  /** The step's report as stored: this one when `recorded`, else the earlier one. */
  usage: StepUsage;
}

/**
 * The provider usage reported for a session's steps (POST /sessions/:id/steps/:stepId/usage),
 * one report per step. The adapters (memory-step-usage-store.ts, redis-step-usage-store.ts)
 * pass test/contract/step-usage-store.contract.ts.
 *
 * Reports of steps a rewind cut stay: the provider served those requests, and the session's hit
 * ratio counts them.
 *
 * Retention (`ttlMs` of each adapter, CTXFLOW_SESSION_TTL_MS): a session's reports are kept
 * for `ttlMs` after its last report, all at once; 0 keeps them until deleteSession.
 */
export interface StepUsageStore {
  /** Records `usage` for its step unless the step has a report: first wins, atomically. */
  record(sessionId: string, usage: StepUsage): Promise<RecordedUsage>;
  /** The report of step `stepId`; undefined when it has none (or the session has none). */
  get(sessionId: string, stepId: string): Promise<StepUsage | undefined>;
  /** The session's reports by ordinal (empty when none). */
  list(sessionId: string): Promise<StepUsage[]>;
  /** Erases the session's reports; nothing when there are none (idempotent). */
  deleteSession(sessionId: string): Promise<void>;
}
