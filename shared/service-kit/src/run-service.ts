/**
 * A service process from start to exit, the one shape the mains share
 * (`services/<name>/src/main.ts` holds only its composition):
 *
 * 1. configuration: parsed once from the environment; problems on stderr, exit 2;
 * 2. the logger, then telemetry, before anything is built;
 * 3. shutdown armed: from here SIGTERM / SIGINT, an uncaught exception and an
 *    unhandled rejection all run the same orderly shutdown (the last two exit 1);
 * 4. `start`: connections (a refusal a variable can fix: one line naming it, exit 2;
 *    any other failure: logged, shutdown, exit 1) and the fastify app, never listening;
 * 5. listen on `host:port`, one `<name>: listening` line;
 * 6. on shutdown: HTTP first (readiness 503 at once, streams end, in-flight requests
 *    finish, connections close by their share of the grace), then the service's own
 *    steps in the order given (consumers before the clients they use), telemetry last;
 *    exit 0, or 1 when a step failed or the grace ran out.
 */
import type { FastifyInstance } from 'fastify';
import { configOrExit } from './config.ts';
import { connectOrExit } from './connection-failure.ts';
import type { TlsFiles } from './connection-security.ts';
import { closeHttp, HTTP_GRACE_SHARE, handleShutdown, type Lifecycle, type ShutdownStep } from './lifecycle.ts';
import { createLogger, type Logger } from './logger.ts';

/** What every service's configuration holds for its lifecycle. */
export interface ServiceConfig {
  readonly host: string;
  readonly port: number;
  readonly logLevel: string;
  /** `CTXFLOW_SHUTDOWN_GRACE_MS`: signal to exit. */
  readonly shutdownGraceMs: number;
}

/** Telemetry as a service runs it (`startTelemetry` of @ctxflow/telemetry). */
export interface ServiceTelemetry {
  metricsText(): Promise<string>;
  shutdown(): Promise<void>;
}

/** What `start` is given: everything the composition needs that is not its own. */
export interface ServiceContext<C extends ServiceConfig, T extends ServiceTelemetry> {
  readonly config: C;
  readonly logger: Logger;
  readonly telemetry: T;
  /** `lifecycle.notStopping` is the readiness check that turns 503 once shutdown began. */
  readonly lifecycle: Lifecycle;
  /**
   * Runs a start step that reaches Kafka or Redis: a refusal a variable can fix
   * (credentials, an untrusted certificate) ends the start with one line naming
   * that variable and exit 2; any other failure is thrown.
   */
  connect<R>(
    what: 'Kafka' | 'Redis',
    security: { names: { credentials: string; ca: string }; tls?: TlsFiles },
    step: () => Promise<R>,
  ): Promise<R>;
}

/** A started service, not yet listening. */
export interface StartedService {
  app: FastifyInstance;
  /** Closes HTTP by `forceAfterMs`; default `closeHttp(app, forceAfterMs)`. */
  closeHttp?(forceAfterMs: number): Promise<void>;
  /** Shutdown steps after HTTP and before telemetry, run in this order. */
  close: ShutdownStep[];
  /** Fields of the `listening` line. */
  listening?: Record<string, unknown>;
}

export interface ServiceDefinition<C extends ServiceConfig, T extends ServiceTelemetry> {
  /** Prefix of the lifecycle lines (`<name>: listening`, `<name>: stopped`) and of stderr refusals. */
  name: string;
  /** The logger's `service` field; default `name`. */
  logService?: string;
  /** Parses the environment: throws ConfigError with every problem. */
  loadConfig(env: Record<string, string | undefined>): C;
  startTelemetry(config: C): T;
  start(context: ServiceContext<C, T>): Promise<StartedService>;
}

/**
 * Runs a service until it is stopped: the process exits from within (see the
 * file's header for the order and the exit codes); the returned promise
 * resolves once it listens.
 */
export async function runService<C extends ServiceConfig, T extends ServiceTelemetry>(
  service: ServiceDefinition<C, T>,
): Promise<void> {
  const config = configOrExit(service.name, () => service.loadConfig(process.env));
  const logger = createLogger({ service: service.logService ?? service.name, level: config.logLevel });
  const telemetry = service.startTelemetry(config);
  let started: StartedService | undefined;
  let startSettled: () => void = () => {};
  const settled = new Promise<void>((resolve) => {
    startSettled = resolve;
  });
  const lifecycle = handleShutdown(
    service.name,
    logger,
    async () => {
      // A signal during the start waits for it (within the grace), so what it opened is closed too.
      await settled;
      const running = started;
      const forceAfterMs = config.shutdownGraceMs * HTTP_GRACE_SHARE;
      return [
        ...(running
          ? [
              {
                name: 'http',
                run: () => (running.closeHttp ? running.closeHttp(forceAfterMs) : closeHttp(running.app, forceAfterMs)),
              },
              ...running.close,
            ]
          : []),
        { name: 'telemetry', run: () => telemetry.shutdown() },
      ];
    },
    { graceMs: config.shutdownGraceMs },
  );
  const fail = (reason: string) => (err: unknown) => {
    logger.error({ err }, `${service.name}: ${reason}`);
    void lifecycle.stop(reason, { failed: true });
  };
  process.on('uncaughtException', fail('uncaughtException'));
  process.on('unhandledRejection', fail('unhandledRejection'));

  try {
    started = await service.start({
      config,
      logger,
      telemetry,
      lifecycle,
      connect: (what, security, step) => connectOrExit(service.name, what, security, step),
    });
    startSettled();
    if (lifecycle.stopping) return;
    await started.app.listen({ host: config.host, port: config.port });
    logger.info({ host: config.host, port: config.port, ...started.listening }, `${service.name}: listening`);
  } catch (err) {
    startSettled();
    fail('cannot start')(err);
  }
}
