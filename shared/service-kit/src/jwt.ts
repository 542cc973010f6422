import { CtxflowError } from '@ctxflow/contracts';
import { createRemoteJWKSet, errors, type JWTPayload, jwtVerify } from 'jose';
import { LRUCache } from 'lru-cache';
import { isScope, type Scope } from './api-keys.ts';

/** The only signature algorithms a token may use: asymmetric ones (no `none`, no HMAC). */
export const JWT_ALGORITHMS = ['RS256', 'PS256', 'ES256', 'EdDSA'] as const;
/** Leeway on `exp` and `nbf`, in seconds. */
export const JWT_CLOCK_TOLERANCE_S = 60;
/** The least time between two JWKS fetches an unknown `kid` may cause, in ms (jose's cooldown). */
export const JWKS_COOLDOWN_MS = 5_000;
/** How long a fetched JWKS is used before it is fetched again, in ms. */
export const JWKS_MAX_AGE_MS = 10 * 60_000;
/** How long a verified token is answered from memory at most, in ms (never past its `exp` + leeway). */
export const JWT_CACHE_TTL_MS = 60_000;
/** The verified tokens held at most, and their characters in all (about 2 bytes each on the heap). */
export const JWT_CACHE_MAX_TOKENS = 10_000;
export const JWT_CACHE_MAX_CHARS = 4 * 1024 * 1024;
const TENANT_MAX_LENGTH = 256;

export interface OidcOptions {
  /** `CTXFLOW_OIDC_ISSUER`: the `iss` every token must carry. */
  issuer: string;
  /** `CTXFLOW_OIDC_AUDIENCE`: an `aud` every token must carry. */
  audience: string;
  /** `CTXFLOW_OIDC_JWKS_URL`; absent: `jwks_uri` of the issuer's `/.well-known/openid-configuration`. */
  jwksUrl?: string;
  /** `CTXFLOW_OIDC_TENANT_CLAIM`, default `tenant`. */
  tenantClaim?: string;
  /** The least ms between two JWKS fetches an unknown `kid` causes (default JWKS_COOLDOWN_MS). */
  cooldownMs?: number;
  /** Verified tokens answered from memory (default JWT_CACHE_MAX_TOKENS); 0 checks every request. */
  cacheMaxTokens?: number;
}

export interface TokenIdentity {
  tenant: string;
  /** The token's `sub`. */
  subject: string;
  scopes: ReadonlySet<Scope>;
}

/** A compact JWS: three base64url parts (the last empty for `alg: none`). */
export function looksLikeJwt(bearer: string): boolean {
  return /^[\w-]+\.[\w-]+\.[\w-]*$/.test(bearer);
}

const refused = (check: string) => new CtxflowError('unauthorized', `token refused: ${check}`);

/** Which check a token failed, from jose's error; never the token or a claim's value. */
function refusal(err: unknown): CtxflowError {
  if (err instanceof errors.JWTExpired) return refused('expired (exp)');
  if (err instanceof errors.JWTClaimValidationFailed) {
    switch (err.claim) {
      case 'iss':
        return refused('wrong issuer (iss)');
      case 'aud':
        return refused('wrong audience (aud)');
      case 'nbf':
        return refused('not yet valid (nbf)');
      case 'iat':
        return refused('issued in the future (iat)');
      default:
        return refused(`claim ${err.claim} is invalid`);
    }
  }
  if (err instanceof errors.JOSEAlgNotAllowed) {
    return refused(`algorithm not allowed (only ${JWT_ALGORITHMS.join(', ')})`);
  }
  if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys) {
    return refused("no signing key of the issuer matches the token's kid");
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) return refused('bad signature');
  if (err instanceof errors.JWKSTimeout || err instanceof errors.JWKSInvalid || err instanceof TypeError) {
    return new CtxflowError('store_unavailable', "the issuer's signing keys could not be fetched; retry");
  }
  if (
    err instanceof errors.JWSInvalid ||
    err instanceof errors.JWTInvalid ||
    err instanceof errors.JOSENotSupported ||
    err instanceof errors.JWKInvalid
  ) {
    return refused('not a valid signed JWT');
  }
  return new CtxflowError('store_unavailable', "the issuer's signing keys could not be fetched; retry");
}

function scopesOf(payload: JWTPayload): ReadonlySet<Scope> {
  const words: string[] = [];
  for (const claim of [payload.scope, payload.scp]) {
    if (typeof claim === 'string') words.push(...claim.split(' '));
    else if (Array.isArray(claim)) words.push(...claim.filter((w): w is string => typeof w === 'string'));
  }
  return new Set(words.filter(isScope));
}

/**
 * Verifies bearer JWTs against the issuer's JWKS with jose: signature (RS256, PS256, ES256,
 * EdDSA only), `iss`, `aud`, `exp` and `nbf` with 60 s leeway; the tenant from the configured
 * claim, scopes from `scope` (space-separated) or `scp` (a list, or space-separated). The
 * JWKS is fetched once, reused, and fetched again at most once per cooldown on an unknown
 * `kid` (jose's createRemoteJWKSet). A refusal is 401 `unauthorized` naming the check.
 *
 * A token that passed is answered from memory (lru-cache, keyed by the token) for at most
 * JWT_CACHE_TTL_MS and never past the time jose would refuse it (`exp` plus the leeway): a
 * runtime sends one token for many requests, and the signature check is most of a request's
 * authentication cost. What a cached token does not see: a signing key the issuer withdrew
 * from its JWKS within that minute. A refusal is never cached.
 */
export class JwtVerifier {
  readonly #options: OidcOptions;
  readonly #tenantClaim: string;
  #jwks: Promise<ReturnType<typeof createRemoteJWKSet>> | undefined;
  readonly #verified: LRUCache<string, TokenIdentity> | undefined;

  constructor(options: OidcOptions) {
    this.#options = options;
    this.#tenantClaim = options.tenantClaim ?? 'tenant';
    const max = options.cacheMaxTokens ?? JWT_CACHE_MAX_TOKENS;
    this.#verified =
      max > 0
        ? new LRUCache({ max, maxSize: JWT_CACHE_MAX_CHARS, sizeCalculation: (_identity, token) => token.length })
        : undefined;
  }

  #keySet(): Promise<ReturnType<typeof createRemoteJWKSet>> {
    this.#jwks ??= this.#jwksUrl().then((url) =>
      createRemoteJWKSet(new URL(url), {
        cooldownDuration: this.#options.cooldownMs ?? JWKS_COOLDOWN_MS,
        cacheMaxAge: JWKS_MAX_AGE_MS,
      }),
    );
    // A discovery that failed is tried again by the next request.
    this.#jwks.catch(() => {
      this.#jwks = undefined;
    });
    return this.#jwks;
  }

  async #jwksUrl(): Promise<string> {
    if (this.#options.jwksUrl) return this.#options.jwksUrl;
    const url = `${this.#options.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
    const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    if (!response.ok) throw new TypeError(`OIDC discovery answered HTTP ${response.status}`);
    const document = (await response.json()) as { jwks_uri?: unknown };
    if (typeof document.jwks_uri !== 'string') throw new TypeError('OIDC discovery has no jwks_uri');
    return document.jwks_uri;
  }

  async verify(token: string): Promise<TokenIdentity> {
    const held = this.#verified?.get(token);
    if (held) return held;
    const identity = await this.#check(token);
    if (this.#verified && token.length <= JWT_CACHE_MAX_CHARS) {
      const ttl = Math.min(JWT_CACHE_TTL_MS, identity.refusedAfterMs - Date.now());
      if (ttl > 0) this.#verified.set(token, identity.caller, { ttl });
    }
    return identity.caller;
  }

  /** The signature and claims checked by jose; `refusedAfterMs`: when jose would refuse the token. */
  async #check(token: string): Promise<{ caller: TokenIdentity; refusedAfterMs: number }> {
    let payload: JWTPayload;
    try {
      const jwks = await this.#keySet();
      ({ payload } = await jwtVerify(token, jwks, {
        issuer: this.#options.issuer,
        audience: this.#options.audience,
        algorithms: [...JWT_ALGORITHMS],
        clockTolerance: JWT_CLOCK_TOLERANCE_S,
      }));
    } catch (err) {
      throw refusal(err);
    }
    const tenant = payload[this.#tenantClaim];
    if (typeof tenant !== 'string' || tenant === '' || tenant.length > TENANT_MAX_LENGTH) {
      throw refused(`no tenant claim (${this.#tenantClaim})`);
    }
    return {
      caller: { tenant, subject: typeof payload.sub === 'string' ? payload.sub : '', scopes: scopesOf(payload) },
      refusedAfterMs:
        typeof payload.exp === 'number' ? (payload.exp + JWT_CLOCK_TOLERANCE_S) * 1000 : Number.POSITIVE_INFINITY,
    };
  }
}
