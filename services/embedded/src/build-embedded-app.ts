import { createBus } from '@ctxflow/bus';
import { feedRoutes, MemoryDeliveryLedger } from '@ctxflow/feed-ingestor';
import { createAuthenticator, type Logger } from '@ctxflow/service-kit';
import { buildRunnerApp, type Clock, createEngine, MemorySessionStore, systemClock } from '@ctxflow/session-runner';
import type { ContextTelemetry } from '@ctxflow/telemetry';
import type { FastifyInstance } from 'fastify';
import type { EmbeddedConfig } from './config.ts';

export interface EmbeddedDeps {
  config: Pick<EmbeddedConfig, 'apiKeys' | 'secrets'>;
  logger?: Logger;
  telemetry?: ContextTelemetry;
  metricsText?: () => Promise<string>;
  clock?: Clock;
  /** More route plugins without credentials, after the feeds (the benchmark adds its baseline route). */
  openRoutes?: ((app: FastifyInstance) => Promise<void>)[];
}

export interface EmbeddedApp {
  app: FastifyInstance;
  close(): Promise<void>;
}

/**
 * The embedded default: feed-ingestor, step-context and session-runner in one
 * process on in-memory adapters, one HTTP server. Never listens.
 */
export async function buildEmbeddedApp(deps: EmbeddedDeps): Promise<EmbeddedApp> {
  const clock = deps.clock ?? systemClock;
  const bus = createBus({ client: 'platformatic', clientId: 'ctxflow-embedded' });
  const store = new MemorySessionStore();
  const engine = createEngine({ store, clock, ...(deps.telemetry ? { telemetry: deps.telemetry } : {}) });
  const ledger = new MemoryDeliveryLedger();
  const app = buildRunnerApp({
    engine,
    authenticate: createAuthenticator(deps.config.apiKeys),
    ...(deps.logger ? { logger: deps.logger } : {}),
    ...(deps.metricsText ? { metricsText: deps.metricsText } : {}),
    openRoutes: [
      async (scope) => {
        await scope.register(feedRoutes, {
          publisher: bus.publisher,
          ledger,
          secrets: deps.config.secrets,
          clock: () => clock.now(),
        });
      },
      ...(deps.openRoutes ?? []),
    ],
  });
  await app.ready();
  return {
    app,
    async close() {
      await app.close();
      await bus.publisher.close();
    },
  };
}
