import { installErrorHandler } from '@ctxflow/service-kit';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { type FeedRoutesDeps, feedRoutes } from './feed-routes.ts';

export interface FeedAppDeps extends FeedRoutesDeps {
  /** A pino logger (service-kit's createLogger redacts signatures); none: no logs. */
  logger?: FastifyBaseLogger;
}

/**
 * The feed-ingestor's HTTP app: `/feeds/<source>` plus `/healthz` and
 * `/readyz`. Never listens; main.ts does, tests call `app.inject()`.
 */
export async function buildFeedApp(deps: FeedAppDeps): Promise<FastifyInstance> {
  const { logger, ...routeDeps } = deps;
  const app: FastifyInstance = logger ? Fastify({ loggerInstance: logger }) : Fastify({ logger: false });
  installErrorHandler(app);
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async () => ({ status: 'ready' }));
  await app.register(feedRoutes, routeDeps);
  return app;
}
