import type { z } from 'zod';
import { entriesOfKeyMap, readKeyFile } from './api-keys.ts';
import type { IdentityConfig } from './auth.ts';

/** A configuration refusal: every problem at once, each naming its variable. */
export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/**
 * Parses the environment once with a service's zod schema; the result is frozen.
 * Nothing else reads `process.env`.
 */
export function parseConfig<S extends z.ZodType>(
  schema: S,
  env: Record<string, string | undefined>,
): Readonly<z.infer<S>> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => `${issue.path.join('.') || 'environment'}: ${issue.message}`),
    );
  }
  return Object.freeze(parsed.data);
}

/** The credential variables: `CTXFLOW_API_KEYS_FILE` and `CTXFLOW_OIDC_*` (`CTXFLOW_API_KEYS` apart). */
function readIdentity(
  env: Record<string, string | undefined>,
  keys: ReadonlyMap<string, string>,
  problems: string[],
): IdentityConfig {
  const identity: { -readonly [K in keyof IdentityConfig]: IdentityConfig[K] } = { keys: entriesOfKeyMap(keys) };
  const file = env.CTXFLOW_API_KEYS_FILE?.trim();
  if (file) {
    try {
      identity.keyFile = { path: file, entries: readKeyFile(file) };
    } catch (err) {
      problems.push(`CTXFLOW_API_KEYS_FILE: ${(err as Error).message}`);
    }
  }
  const issuer = env.CTXFLOW_OIDC_ISSUER?.trim();
  const audience = env.CTXFLOW_OIDC_AUDIENCE?.trim();
  const jwksUrl = env.CTXFLOW_OIDC_JWKS_URL?.trim();
  const tenantClaim = env.CTXFLOW_OIDC_TENANT_CLAIM?.trim();
  const isUrl = (value: string) => {
    try {
      return /^https?:$/.test(new URL(value).protocol);
    } catch {
      return false;
    }
  };
  if (issuer) {
    if (!isUrl(issuer)) problems.push("CTXFLOW_OIDC_ISSUER: expected an http(s) URL (the tokens' iss)");
    if (!audience) problems.push("CTXFLOW_OIDC_AUDIENCE: required with CTXFLOW_OIDC_ISSUER (the tokens' aud)");
    if (jwksUrl && !isUrl(jwksUrl)) problems.push('CTXFLOW_OIDC_JWKS_URL: expected an http(s) URL');
    identity.oidc = {
      issuer,
      audience: audience ?? '',
      ...(jwksUrl ? { jwksUrl } : {}),
      ...(tenantClaim ? { tenantClaim } : {}),
    };
  } else {
    for (const name of ['CTXFLOW_OIDC_AUDIENCE', 'CTXFLOW_OIDC_JWKS_URL', 'CTXFLOW_OIDC_TENANT_CLAIM']) {
      if (env[name]?.trim()) problems.push(`${name}: set without CTXFLOW_OIDC_ISSUER, which turns JWTs on`);
    }
  }
  return identity;
}

/**
 * Parses a service's schema and its credentials together, reporting every
 * problem at once: `CTXFLOW_API_KEYS` (`tenant:key,...`) must be well formed, so must
 * `CTXFLOW_API_KEYS_FILE` (each bad line named by its number) and the `CTXFLOW_OIDC_*`
 * variables; without any credentials only a loopback `CTXFLOW_HOST` may be bound.
 * `apiKeys` is `CTXFLOW_API_KEYS`'s map; `identity` all of them (createIdentity).
 */
export function parseConfigWithAuth<S extends z.ZodType>(
  schema: S,
  env: Record<string, string | undefined>,
  helpers: {
    parseApiKeys(raw: string | undefined): Map<string, string>;
    isLoopback(host: string): boolean;
  },
): Readonly<z.infer<S> & { apiKeys: Map<string, string>; identity: IdentityConfig }> {
  const problems: string[] = [];
  let parsed: Readonly<z.infer<S>> | undefined;
  try {
    parsed = parseConfig(schema, env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    problems.push(...err.problems);
  }
  let apiKeys = new Map<string, string>();
  try {
    apiKeys = helpers.parseApiKeys(env.CTXFLOW_API_KEYS);
  } catch (err) {
    problems.push((err as Error).message);
  }
  const identity = readIdentity(env, apiKeys, problems);
  const credentials =
    apiKeys.size > 0 || Boolean(env.CTXFLOW_API_KEYS_FILE?.trim()) || Boolean(env.CTXFLOW_OIDC_ISSUER?.trim());
  const host = env.CTXFLOW_HOST || '127.0.0.1';
  if (!credentials && !helpers.isLoopback(host) && !problems.some((p) => p.startsWith('CTXFLOW_HOST'))) {
    problems.push(
      `CTXFLOW_HOST: refusing to bind ${host} without CTXFLOW_API_KEYS: without keys only loopback is served`,
    );
  }
  if (problems.length > 0 || parsed === undefined) throw new ConfigError(problems);
  return Object.freeze({ ...(parsed as object), apiKeys, identity }) as Readonly<
    z.infer<S> & { apiKeys: Map<string, string>; identity: IdentityConfig }
  >;
}

/**
 * A composition root's first step: the parsed configuration, or the process
 * ends with exit code 2 and every problem on stderr, prefixed by the service.
 */
export function configOrExit<T>(service: string, load: () => T): T {
  try {
    return load();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${service}: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}
