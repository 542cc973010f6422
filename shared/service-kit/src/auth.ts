import { CtxflowError, DEFAULT_TENANT } from '@ctxflow/contracts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  ALL_SCOPES,
  type ApiKeyEntry,
  ApiKeyRing,
  entriesOfKeyMap,
  type KeyFileWatch,
  type Scope,
  watchKeyFile,
} from './api-keys.ts';
import type { AuditLog } from './audit.ts';
import { JwtVerifier, looksLikeJwt, type OidcOptions } from './jwt.ts';
import type { Logger } from './logger.ts';

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

/** Who is calling: the tenant whose data the request reaches, who in it, and what they may do. */
export interface Identity {
  tenant: string;
  /** `key:<key id>` for an API key (the first 12 hex digits of its SHA-256), the token's `sub` for a JWT. */
  subject: string;
  scopes: ReadonlySet<Scope>;
}

/** Resolves an `Authorization` header to an identity, or refuses with 401 `unauthorized`. */
export type Authenticate = (authorization: string | undefined) => Identity | Promise<Identity>;

/** The caller of a deployment without credentials (loopback only): the default tenant, every scope. */
export const LOOPBACK_IDENTITY: Identity = Object.freeze({
  tenant: DEFAULT_TENANT,
  subject: 'loopback',
  scopes: ALL_SCOPES,
});

export interface AuthenticatorOptions {
  /** Bearer JWTs are verified by it when they are not a key. */
  jwt?: JwtVerifier;
  /** Whether a caller must present credentials; default: when there is a key or a verifier. */
  required?: boolean;
}

/**
 * Resolves a bearer header: an API key (looked up by its SHA-256 in `keys`: constant time,
 * whatever the number of keys), else, with a verifier, a JWT. Without credentials configured
 * every caller is LOOPBACK_IDENTITY. `keys` is `CTXFLOW_API_KEYS`'s map (key -> tenant, every
 * scope) or a ring a key file keeps current.
 */
export function createAuthenticator(
  keys: ReadonlyMap<string, string> | ApiKeyRing,
  options: AuthenticatorOptions = {},
): Authenticate {
  const ring = keys instanceof ApiKeyRing ? keys : new ApiKeyRing(entriesOfKeyMap(keys));
  const { jwt } = options;
  const required = options.required ?? (ring.size > 0 || jwt !== undefined);
  return (authorization) => {
    if (!required) return LOOPBACK_IDENTITY;
    const match = /^Bearer\s+(.+)$/i.exec(authorization ?? '');
    if (!match) throw new CtxflowError('unauthorized', 'missing bearer credentials');
    const bearer = match[1]!.trim();
    const key = ring.lookup(bearer);
    if (key) return { tenant: key.tenant, subject: `key:${key.keyId}`, scopes: key.scopes };
    if (jwt && looksLikeJwt(bearer)) return jwt.verify(bearer);
    throw new CtxflowError('unauthorized', jwt ? 'neither a known API key nor a JWT' : 'unknown API key');
  };
}

/** What parseConfigWithAuth reads of the credentials. */
export interface IdentityConfig {
  /** `CTXFLOW_API_KEYS` entries (every scope). */
  keys: readonly ApiKeyEntry[];
  /** `CTXFLOW_API_KEYS_FILE` and its entries at startup. */
  keyFile?: { path: string; entries: readonly ApiKeyEntry[] };
  /** `CTXFLOW_OIDC_*`: bearer JWTs are accepted. */
  oidc?: OidcOptions;
}

/** Whether the configuration requires credentials (else only loopback is served). */
export function credentialsConfigured(identity: IdentityConfig): boolean {
  return identity.keys.length > 0 || identity.keyFile !== undefined || identity.oidc !== undefined;
}

/**
 * A service's authenticator from its configuration: the keys of `CTXFLOW_API_KEYS` and of the
 * key file (watched: a change applies within about a second, an unreadable or malformed file
 * keeps the keys in use), JWTs with `CTXFLOW_OIDC_ISSUER`. `close` stops watching.
 */
export function createIdentity(
  identity: IdentityConfig,
  options: { log?: Logger; audit?: AuditLog; pollMs?: number; jwksCooldownMs?: number } = {},
): { authenticate: Authenticate; ring: ApiKeyRing; close(): void } {
  const ring = new ApiKeyRing([...identity.keys, ...(identity.keyFile?.entries ?? [])]);
  let watch: KeyFileWatch | undefined;
  const file = identity.keyFile;
  if (file) {
    watch = watchKeyFile({
      file: file.path,
      ring,
      fixed: identity.keys,
      ...(options.log ? { log: options.log } : {}),
      ...(options.pollMs !== undefined ? { pollMs: options.pollMs } : {}),
      onReload: ({ ok }) =>
        options.audit?.record({
          tenant: '*',
          subject: 'operator',
          action: 'api-keys.reload',
          target: file.path,
          outcome: ok ? 'ok' : 'refused',
        }),
    });
  }
  const jwt = identity.oidc
    ? new JwtVerifier({
        ...identity.oidc,
        ...(options.jwksCooldownMs !== undefined ? { cooldownMs: options.jwksCooldownMs } : {}),
      })
    : undefined;
  const authenticate = createAuthenticator(ring, {
    required: credentialsConfigured(identity),
    ...(jwt ? { jwt } : {}),
  });
  return { authenticate, ring, close: () => watch?.close() };
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

export function isLoopback(host: string): boolean {
  return LOOPBACK.has(host) || host.startsWith('127.');
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller's tenant, set by `tenantHook`. */
    tenant: string;
    /** The caller, set by `tenantHook`. */
    identity: Identity;
  }
  interface FastifyContextConfig {
    /** The scope a caller needs for this route (securedRoute requires one on every secured route). */
    scope?: Scope;
  }
}

/** Refuses with 403 `forbidden` unless the caller holds `scope`. */
export function requireScope(request: FastifyRequest, scope: Scope): void {
  if (!request.identity?.scopes.has(scope)) {
    throw new CtxflowError('forbidden', `this request needs the ${scope} scope`);
  }
}

/**
 * An onRequest hook for a plugin scope whose routes need credentials: it sets
 * `request.tenant` and `request.identity` or refuses with 401 `unauthorized`, then refuses a
 * caller without the route's scope (`config.scope`) with 403 `forbidden`.
 */
export function tenantHook(authenticate: Authenticate) {
  const accept = (request: FastifyRequest, identity: Identity) => {
    request.identity = identity;
    request.tenant = identity.tenant;
    const scope = request.routeOptions.config.scope;
    if (scope) requireScope(request, scope);
  };
  // Callback style: no promise per request on the hot path (API keys answer synchronously).
  return (request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void) => {
    let result: Identity | Promise<Identity>;
    try {
      result = authenticate(request.headers.authorization);
      if (!(result instanceof Promise)) {
        accept(request, result);
        done();
        return;
      }
    } catch (error) {
      done(error as Error);
      return;
    }
    result.then(
      (identity) => {
        try {
          accept(request, identity);
        } catch (error) {
          done(error as Error);
          return;
        }
        done();
      },
      (error: Error) => done(error),
    );
  };
}
