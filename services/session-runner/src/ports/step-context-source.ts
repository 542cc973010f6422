import type { Cursor } from '@ctxflow/contracts';

export interface StepContextRequest {
  sessionId: string;
  agentId?: string;
  /** The cursor of the last batch that reached the log; undefined before the first (R23). */
  cursor: Cursor | undefined;
  /** The batch limit, cursor included (R25). */
  maxBytes: number;
  /** Fires at the time limit (R25). */
  signal: AbortSignal;
  /**
   * A source that knows the trace context of what its batch carries (the
   * ticket feed) hands the W3C traceparents here before `fetch` resolves; the
   * context pass links its span to them. Never part of the result itself.
   */
  traced?(traceparents: readonly string[]): void;
}

/**
 * The stepContext hook (R22-R27). Returns what is new since `cursor`, as
 * `{ items, cursor }`, or nothing. The result is untrusted: the context pass
 * validates it and skips the hook when it is not a valid result.
 */
export interface StepContextSource {
  fetch(request: StepContextRequest): Promise<unknown>;
  /** A branch starts with the source session's feed position (R32); `tenant` owns both sessions. */
  copySession?(fromSessionId: string, toSessionId: string, tenant: string): Promise<void>;
}
