/** One step of an orderly shutdown, run in the order given. */
export interface ShutdownStep {
  name: string;
  run(): Promise<unknown>;
}

export interface Lifecycle {
  /** True from the first SIGTERM / SIGINT on. */
  readonly stopping: boolean;
  /**
   * A `/readyz` probe: throws `stopping` once shutdown began, so the load
   * balancer (Kubernetes endpoints) stops sending work while in-flight work finishes.
   */
  notStopping(): Promise<void>;
}

interface ShutdownLog {
  info(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/**
 * On the first SIGTERM or SIGINT: marks the process stopping (readiness turns
 * 503 at once), runs `steps()` in order (each awaited; a failing step is logged
 * and the next still runs), then exits 0, or 1 when a step failed. Typical
 * order: stop taking HTTP work (fastify close drains in-flight requests),
 * stop consumers (the in-flight batch finishes, offsets commit), close clients,
 * flush telemetry. A second signal while stopping is ignored.
 */
export function handleShutdown(service: string, log: ShutdownLog, steps: () => ShutdownStep[]): Lifecycle {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, `${service}: stopping`);
    let failed = false;
    for (const step of steps()) {
      try {
        await step.run();
      } catch (err) {
        failed = true;
        log.error({ step: step.name, err }, `${service}: shutdown step failed`);
      }
    }
    log.info({ signal, failed }, `${service}: stopped`);
    process.exit(failed ? 1 : 0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  return {
    get stopping() {
      return stopping;
    },
    async notStopping() {
      if (stopping) throw new Error('stopping');
    },
  };
}

/** `probe` limited to `ms` milliseconds: a readiness check must answer quickly even when a server hangs. */
export function withinMs(probe: () => Promise<unknown>, ms: number): () => Promise<void> {
  return async () => {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        probe(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  };
}
