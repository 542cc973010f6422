import {
  type AuditLog,
  type Authenticate,
  auditHook,
  createAuditLog,
  createServer,
  registerTenantRateLimit,
  type ServerOptions,
  securedRoute,
  type TenantRateLimit,
  tenantHook,
} from '@ctxflow/service-kit';
import type { FastifyInstance } from 'fastify';
import { weakMessageMemo } from './adapters/weak-message-memo.ts';
import type { ContextEngine } from './domain/context-engine.ts';
import { providerFormats } from './domain/provider-formats/index.ts';
import { sessionRoutes } from './http/session-routes.ts';
import type { StreamFollowers } from './http/stream-followers.ts';
import { usageRoutes } from './http/usage-routes.ts';

export interface RunnerAppDeps extends ServerOptions {
  engine: ContextEngine;
  authenticate: Authenticate;
  /** Where the audit lines go (default: the server's logger). */
  audit?: AuditLog;
  /** Per-tenant limits: a request rate (CTXFLOW_RATE_LIMIT_PER_MINUTE), live sessions (CTXFLOW_TENANT_MAX_SESSIONS). */
  limits?: { rate?: TenantRateLimit; maxSessions?: number };
  /** More route plugins behind the same credentials (the embedded default adds subscriptions). */
  protectedRoutes?: ((app: FastifyInstance) => Promise<void>)[];
  /** Route plugins without credentials (the embedded default adds the feeds). */
  openRoutes?: ((app: FastifyInstance) => Promise<void>)[];
  /** `GET /sessions/:id/stream` followers and their limits (default: stream-followers.ts limits). */
  streams?: StreamFollowers;
}

/** The session-runner's HTTP app (with `GET /openapi.json`, open); never listens. */
export function buildRunnerApp(deps: RunnerAppDeps): FastifyInstance {
  const app = createServer(deps);
  app.register(async (scope) => {
    scope.addHook('onRoute', securedRoute);
    scope.addHook('onRequest', tenantHook(deps.authenticate));
    scope.addHook('onResponse', auditHook(deps.audit ?? createAuditLog(app.log)));
    if (deps.limits?.rate) await registerTenantRateLimit(scope, deps.limits.rate);
    await sessionRoutes(scope, {
      engine: deps.engine,
      // Each neutral message converted once per format while a request holds it.
      formats: providerFormats(weakMessageMemo),
      ...(deps.streams ? { streams: deps.streams } : {}),
      ...(deps.limits?.maxSessions !== undefined ? { maxSessions: deps.limits.maxSessions } : {}),
    });
    await usageRoutes(scope, { engine: deps.engine });
    for (const routes of deps.protectedRoutes ?? []) await routes(scope);
  });
  for (const routes of deps.openRoutes ?? []) app.register(routes);
  return app;
}
