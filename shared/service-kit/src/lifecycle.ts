import type { FastifyInstance } from 'fastify';

/** One step of an orderly shutdown, run in the order given. */
export interface ShutdownStep {
  name: string;
  run(): Promise<unknown>;
}

export interface Lifecycle {
  /** True from the first SIGTERM / SIGINT (or `stop()`) on. */
  readonly stopping: boolean;
  /**
   * A `/readyz` probe: throws `stopping` once shutdown began, so the load
   * balancer (Kubernetes endpoints) stops sending work while in-flight work finishes.
   */
  notStopping(): Promise<void>;
  /**
   * Begins the shutdown as a signal does, for `reason` (a start that failed, an
   * uncaught error): the steps run, then the process exits, with 1 when
   * `failed` even if every step succeeded. A call while stopping is ignored.
   */
  stop(reason: string, options?: { failed?: boolean }): Promise<void>;
}

interface ShutdownLog {
  info(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** Default of `CTXFLOW_SHUTDOWN_GRACE_MS`: how long a stopping process may take, SIGTERM to exit. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 30_000;

/** The share of the grace that HTTP connections get before they are closed (the rest is for consumers, clients, telemetry). */
export const HTTP_GRACE_SHARE = 0.5;

export interface ShutdownOptions {
  /**
   * The process exits within this many ms of the signal: when steps are still
   * running then, it logs which one and exits 1.
   */
  graceMs: number;
}

/**
 * On the first SIGTERM or SIGINT: marks the process stopping (readiness turns
 * 503 at once), runs `steps()` in order (each awaited; a failing step is logged
 * and the next still runs), then exits 0, or 1 when a step failed or the
 * grace period (`options.graceMs`) ran out first. Typical order: stop taking
 * HTTP work (`closeHttp`: streams end, in-flight requests finish, connections
 * close by their share of the grace), stop consumers (the in-flight batch
 * finishes, offsets commit), close clients, flush telemetry. A second signal
 * while stopping is ignored.
 */
export function handleShutdown(
  service: string,
  log: ShutdownLog,
  steps: () => ShutdownStep[] | Promise<ShutdownStep[]>,
  options: ShutdownOptions,
): Lifecycle {
  let stopping = false;
  const stop = async (signal: string, reason: { failed?: boolean } = {}) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal, graceMs: options.graceMs }, `${service}: stopping`);
    let current = '';
    // Kept referenced: a step stuck on nothing the event loop tracks still ends in exit 1 at the deadline.
    setTimeout(() => {
      log.error({ signal, step: current, graceMs: options.graceMs }, `${service}: shutdown grace elapsed`);
      process.exit(1);
    }, options.graceMs);
    let failed = reason.failed === true;
    current = 'start'; // steps() may wait for a start still under way
    for (const step of await steps()) {
      current = step.name;
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
    stop,
  };
}

/**
 * Closes a listening fastify app by `forceAfterMs`: it stops accepting
 * connections and answers new requests on open ones 503, its `preClose` hooks
 * end open streams, idle keep-alive sockets close at once and, while closing,
 * every 100 ms (a socket whose last response just finished stays open as
 * keep-alive otherwise), and the connections still open after `forceAfterMs`
 * (a request still running, a client not reading) are destroyed.
 */
export async function closeHttp(app: FastifyInstance, forceAfterMs: number): Promise<void> {
  const server = app.server;
  const reap = setInterval(() => server.closeIdleConnections(), 100);
  const force = setTimeout(() => server.closeAllConnections(), forceAfterMs);
  try {
    await app.close();
  } finally {
    clearInterval(reap);
    clearTimeout(force);
  }
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
