import { timingSafeEqual } from 'node:crypto';
import { CtxflowError, DEFAULT_TENANT } from '@ctxflow/contracts';

/** Tenant used when no API keys are configured (loopback-only mode); defined with the TicketUpdate contract. */
export { DEFAULT_TENANT };

/**
 * Parses `CTXFLOW_API_KEYS` (`tenant:key,tenant:key`). Throws a message naming
 * the variable for a malformed entry.
 */
export function parseApiKeys(raw: string | undefined): Map<string, string> {
  const keys = new Map<string, string>();
  if (!raw?.trim()) return keys;
  for (const entry of raw.split(',')) {
    const trimmed = entry.trim();
    const colon = trimmed.indexOf(':');
    if (colon <= 0 || colon === trimmed.length - 1) {
      throw new Error('CTXFLOW_API_KEYS: each entry must be tenant:key');
    }
    keys.set(trimmed.slice(colon + 1), trimmed.slice(0, colon));
  }
  return keys;
}

/** Resolves a bearer header to a tenant, in constant time per configured key. */
export function createAuthenticator(keys: Map<string, string>): (authorization: string | undefined) => string {
  const entries = [...keys].map(([key, tenant]) => ({ key: Buffer.from(key), tenant }));
  return (authorization) => {
    if (entries.length === 0) return DEFAULT_TENANT;
    const match = /^Bearer\s+(.+)$/i.exec(authorization ?? '');
    if (!match) throw new CtxflowError('unauthorized', 'missing bearer credentials');
    const given = Buffer.from(match[1]!.trim());
    let tenant: string | undefined;
    for (const entry of entries) {
      if (entry.key.length === given.length && timingSafeEqual(entry.key, given)) tenant = entry.tenant;
    }
    if (!tenant) throw new CtxflowError('unauthorized', 'unknown API key');
    return tenant;
  };
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

export function isLoopback(host: string): boolean {
  return LOOPBACK.has(host) || host.startsWith('127.');
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller's tenant, set by `tenantHook`. */
    tenant: string;
  }
}

/**
 * An onRequest hook for a plugin scope whose routes need credentials: it sets
 * `request.tenant` or refuses with 401 `unauthorized`.
 */
export function tenantHook(authenticate: (authorization: string | undefined) => string) {
  // Callback style: no promise per request on the hot path.
  return (
    request: import('fastify').FastifyRequest,
    _reply: import('fastify').FastifyReply,
    done: (error?: Error) => void,
  ) => {
    try {
      request.tenant = authenticate(request.headers.authorization);
    } catch (error) {
      done(error as Error);
      return;
    }
    done();
  };
}
