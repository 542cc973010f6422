import {
  type Authenticate,
  auditHook,
  createAuditLog,
  createServer,
  type Logger,
  type ServiceTokens,
  securedRoute,
  tenantHook,
} from '@ctxflow/service-kit';
import { type SessionDirectory, type SubscriptionStore, subscriptionRoutes } from '@ctxflow/subscriptions';
import type { FastifyInstance } from 'fastify';
import type { FeedStepContext } from './domain/feed-step-context.ts';
import { stepContextRoutes } from './http/step-context-routes.ts';

export interface StepContextAppDeps {
  subscriptions: SubscriptionStore;
  /** Who owns a session (RedisSessionDirectory on the stack); absent: no subscription routes. */
  directory?: SessionDirectory;
  feed: FeedStepContext;
  /** The tokens `POST /step-context` requires (CTXFLOW_SERVICE_TOKEN_FILE); absent: none. */
  serviceTokens?: ServiceTokens;
  /** Resolves a bearer header to a tenant (service-kit createAuthenticator). */
  authenticate: Authenticate;
  logger?: Logger;
  metricsText?: () => Promise<string>;
  readiness?: Record<string, () => Promise<void>>;
}

/**
 * step-context's HTTP server as its own process: the subscription routes
 * behind credentials (with a directory), `POST /step-context` for the
 * runner, and the operational routes. Never listens: tests call `app.inject()`.
 */
export function buildStepContextApp(deps: StepContextAppDeps): FastifyInstance {
  const app = createServer({
    ...(deps.logger ? { logger: deps.logger } : {}),
    ...(deps.metricsText ? { metricsText: deps.metricsText } : {}),
    ...(deps.readiness ? { readiness: deps.readiness } : {}),
  });
  const { directory } = deps;
  if (directory) {
    app.register(async (scope) => {
      scope.addHook('onRoute', securedRoute);
      scope.addHook('onRequest', tenantHook(deps.authenticate));
      scope.addHook('onResponse', auditHook(createAuditLog(app.log)));
      await scope.register(subscriptionRoutes, { subscriptions: deps.subscriptions, directory });
    });
  }
  app.register(stepContextRoutes, {
    feed: deps.feed,
    ...(deps.serviceTokens ? { serviceTokens: deps.serviceTokens } : {}),
  });
  return app;
}
