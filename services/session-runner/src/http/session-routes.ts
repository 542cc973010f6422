import type { ZodTypeProvider } from '@ctxflow/service-kit';
import type { FastifyInstance } from 'fastify';
import type { ContextEngine } from '../domain/context-engine.ts';
import type { ProviderFormats } from '../domain/provider-formats/index.ts';
import { agentRoutes } from './agent-routes.ts';
import { historyRoutes } from './history-routes.ts';
import { type RouteApi, type RouteContext, sessionQuota } from './route-kit.ts';
import { sessionRecordRoutes } from './session-record-routes.ts';
import { stepRoutes } from './step-routes.ts';
import { StreamFollowers } from './stream-followers.ts';
import { streamRoutes } from './stream-routes.ts';
import { toolCallRoutes } from './tool-call-routes.ts';

export interface SessionRoutesDeps {
  engine: ContextEngine;
  /** A step answer's request in a provider's format (buildRunnerApp: the formats with a memo per message). */
  formats: ProviderFormats;
  /** The server's stream followers (their limits; ended at close). Default: one per registration, default limits. */
  streams?: StreamFollowers;
  /** Live sessions a tenant may have (CTXFLOW_TENANT_MAX_SESSIONS); absent: no cap. */
  maxSessions?: number;
}

/**
 * The session-runner's HTTP contract and its tool-side routes (README.md "HTTP API").
 * Register inside a scope that sets `request.tenant`. Each route's block declares its whole
 * contract (params, body, every answer): the declarations are the contract, and /openapi.json
 * is generated from them, in the order they are registered here (agents, sessions, the
 * conversation, the tool side, history, the stream).
 */
export async function sessionRoutes(app: FastifyInstance, deps: SessionRoutesDeps) {
  const { engine, formats, maxSessions } = deps;
  const context: RouteContext = { engine, formats, withinQuota: sessionQuota(engine, maxSessions) };
  const streams = deps.streams ?? new StreamFollowers(undefined, app.log);
  // Before the server stops listening: open streams end (a `shutdown` event, then the response ends),
  // so closing waits for no follower.
  app.addHook('preClose', async () => streams.endAll());
  const api: RouteApi = app.withTypeProvider<ZodTypeProvider>();
  agentRoutes(api, context);
  sessionRecordRoutes(api, context);
  stepRoutes(api, context);
  toolCallRoutes(api, context);
  historyRoutes(api, context);
  streamRoutes(api, context, streams);
}
