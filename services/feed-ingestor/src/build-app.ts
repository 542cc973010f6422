import { type FeedRoutesDeps, feedRoutes } from '@ctxflow/feeds';
import { createServer } from '@ctxflow/service-kit';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';

export interface FeedAppDeps extends FeedRoutesDeps {
  /** A pino logger (service-kit's createLogger redacts signatures); none: no logs. */
  logger?: FastifyBaseLogger;
  /** Prometheus text for `GET /metrics` (startTelemetry's metricsText); none: an empty exposition. */
  metricsText?: () => Promise<string>;
  /** Probes of `GET /readyz` (Kafka, Redis, not stopping): name -> throws when not ready. */
  readiness?: Record<string, () => Promise<void>>;
}

/**
 * The feed-ingestor's HTTP app: `/feeds/<source>` plus `/healthz`, `/readyz`
 * and `/metrics`. Never listens; main.ts does, tests call `app.inject()`.
 */
export async function buildFeedApp(deps: FeedAppDeps): Promise<FastifyInstance> {
  const { logger, metricsText, readiness, ...routeDeps } = deps;
  const app = createServer({
    ...(logger ? { logger } : {}),
    ...(metricsText ? { metricsText } : {}),
    ...(readiness ? { readiness } : {}),
  });
  await app.register(feedRoutes, routeDeps);
  return app;
}
