/**
 * What the session-runner's route files share (session-routes.ts registers them): the typed
 * fastify scope, the engine and the tenant's session cap, path parameters and error answers.
 */
import { CtxflowError, idSchema, MAX_CONTEXT_BODY_BYTES } from '@ctxflow/contracts';
import { ERROR_ANSWERS, type ZodTypeProvider } from '@ctxflow/service-kit';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import { z } from 'zod';
import type { ContextEngine } from '../domain/context-engine.ts';
import type { ProviderFormats } from '../domain/provider-formats/index.ts';

/** A fastify scope whose route schemas are zod (validated, serialized and documented from them). */
export type RouteApi = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  ZodTypeProvider
>;

/** What the route handlers run on. */
export interface RouteContext {
  engine: ContextEngine;
  /** A new session (created or branched) over the tenant's cap: 429 `quota_exceeded`, nothing written. */
  withinQuota(tenant: string): Promise<void>;
  /** A step answer's request in a provider's format. */
  formats: ProviderFormats;
}

export const agentParams = z.object({ agentId: idSchema });
export const sessionParams = z.object({ sessionId: idSchema });
export const callParams = z.object({ sessionId: idSchema, callId: idSchema });
export const { 404: notFound, 409: conflict } = ERROR_ANSWERS;

/**
 * Routes whose body is context blocks: a body far past the context limit is refused before it is
 * parsed, so no request holds the event loop parsing megabytes it would refuse anyway.
 */
export const contextBody = { bodyLimit: MAX_CONTEXT_BODY_BYTES };

/** The session cap of a tenant (CTXFLOW_TENANT_MAX_SESSIONS; undefined: no cap) as a check. */
export function sessionQuota(
  engine: ContextEngine,
  maxSessions: number | undefined,
): (tenant: string) => Promise<void> {
  return async (tenant: string) => {
    if (maxSessions === undefined) return;
    const live = await engine.listSessions(tenant, maxSessions);
    if (live.length >= maxSessions) {
      throw new CtxflowError(
        'quota_exceeded',
        `the tenant has ${maxSessions} live sessions, its cap (CTXFLOW_TENANT_MAX_SESSIONS): erase one first`,
      );
    }
  };
}
