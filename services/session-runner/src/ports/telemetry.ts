/** What a context pass tells its span (see RunnerTelemetry.contextPass). */
export interface PassTrace {
  /**
   * Links the pass to where the items of its hook batch came from: W3C
   * traceparents, opaque to the engine. Fan-in (one pass, many updates) is
   * expressed by links, never by parenthood: the pass keeps its own parent
   * (the step request's trace, or none).
   */
  link(traceparents: readonly string[]): void;
  /** The step an attempt commits (a pass retried after a conflict names each attempt's step). */
  step(stepId: string): void;
}

/** What the context pass reports (implemented on OpenTelemetry by adapters/otel-runner-telemetry.ts). */
export interface RunnerTelemetry {
  contextSkipped(event: { sessionId: string; stepId: string; reason: string; message: string }): void;
  stepCommitted(event: {
    sessionId: string;
    stepId: string;
    mode: string;
    rows: { kind: string; source: string }[];
    durationMs: number;
    requestBytes: number;
    prefixReusedBytes: number;
  }): void;
  /**
   * A step's provider usage was recorded (once per step): its tokens, what its unchanged
   * prefix predicted cached, and whether the provider cached less (`shortfall`). Absent: not told.
   */
  providerUsage?(event: {
    tenant: string;
    sessionId: string;
    stepId: string;
    format: string;
    inputTokens: number;
    cachedTokens: number;
    predictedTokens: number | null;
    shortfall: boolean;
  }): void;
  /** Runs one whole context pass inside a span; absent: the pass runs untraced. */
  contextPass?<T>(event: { sessionId: string; mode: string }, fn: (pass: PassTrace) => Promise<T>): Promise<T>;
  /** Runs the pass's one atomic store commit inside a span; absent: untraced. */
  storeCommit?<T>(event: { sessionId: string; rowCount: number }, fn: () => Promise<T>): Promise<T>;
}

export const noopRunnerTelemetry: RunnerTelemetry = { contextSkipped() {}, stepCommitted() {} };

/** A PassTrace that records nothing. */
export const untracedPass: PassTrace = { link() {}, step() {} };
