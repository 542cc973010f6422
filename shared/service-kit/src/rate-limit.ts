import { CtxflowError } from '@ctxflow/contracts';
import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import type { Cluster, Redis } from 'ioredis';

export interface TenantRateLimit {
  /** `CTXFLOW_RATE_LIMIT_PER_MINUTE`: requests per tenant per minute. */
  perMinute: number;
  /** The count's store, shared by every replica on it; absent: this process's memory. */
  redis?: Redis | Cluster;
  /** Key prefix on Redis (CTXFLOW_REDIS_PREFIX); the counts are `<prefix>:rate-limit:<tenant>`. */
  prefix?: string;
}

/**
 * Registers @fastify/rate-limit on a secured scope, before its routes: each tenant (not each
 * address) may send `perMinute` requests a minute to them, counted in Redis when given so
 * replicas share one count. Over it: 429 `rate_limited` (retryable) with `Retry-After` (s).
 * Counted after the credentials hook (the tenant is known) and before the body is parsed.
 * A store that does not answer lets the request through (the limit protects, it is not a
 * reason to refuse work).
 */
export async function registerTenantRateLimit(scope: FastifyInstance, limit: TenantRateLimit): Promise<void> {
  await scope.register(fastifyRateLimit, {
    global: true,
    max: limit.perMinute,
    timeWindow: 60_000,
    hook: 'preParsing',
    keyGenerator: (request) => request.tenant,
    skipOnError: true,
    ...(limit.redis ? { redis: limit.redis, nameSpace: `${limit.prefix ?? 'ctxflow'}:rate-limit:` } : {}),
    errorResponseBuilder: (_request, context) =>
      new CtxflowError(
        'rate_limited',
        `over ${context.max} requests a minute for this tenant (CTXFLOW_RATE_LIMIT_PER_MINUTE); retry in ${Math.max(1, Math.ceil(context.ttl / 1000))} s`,
      ),
  });
}
