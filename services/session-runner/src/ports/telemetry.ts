/** What the context pass reports (implemented by @ctxflow/telemetry). */
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
}

export const noopRunnerTelemetry: RunnerTelemetry = { contextSkipped() {}, stepCommitted() {} };
