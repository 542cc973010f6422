import { DEFAULT_TENANT, FEED_SOURCE_NAME, type FeedSource } from '@ctxflow/contracts';
import { parseApiKeys } from '@ctxflow/service-kit';
import type { z } from 'zod';
import { standardWebhooksKey } from './verifiers/standard-webhooks.ts';

/** One webhook secret of a feed and the tenant whose deliveries it signs. */
export interface TenantSecret {
  tenant: string;
  secret: string;
}

/**
 * The secrets of each feed source; a source without any is off (404
 * `feed_disabled`). A plain string is the one secret of a single-tenant
 * deployment: its deliveries belong to DEFAULT_TENANT.
 */
export type FeedSecrets = Partial<Record<FeedSource, string | readonly TenantSecret[]>>;

/** The longest tenant a TicketUpdate carries (ticket-update.ts). */
export const MAX_TENANT_LENGTH = 256;

/** The prefix of every feed's secret variable. */
export const FEED_SECRET_PREFIX = 'CTXFLOW_FEED_SECRET_';

/** The variable that holds a source's secrets: `CTXFLOW_FEED_SECRET_<SOURCE>` (upper case, `-` as `_`). */
export function feedSecretVar(source: FeedSource): string {
  return `${FEED_SECRET_PREFIX}${source.toUpperCase().replaceAll('-', '_')}`;
}

/**
 * The source a secret variable configures: `CTXFLOW_FEED_SECRET_MY_TRACKER`
 * is `my-tracker` (lower case, `_` as `-`); undefined when the rest is not a
 * source name (FEED_SOURCE_NAME).
 */
export function feedSourceOfVar(variable: string): FeedSource | undefined {
  if (!variable.startsWith(FEED_SECRET_PREFIX)) return undefined;
  const rest = variable.slice(FEED_SECRET_PREFIX.length);
  if (!/^[A-Z0-9_]+$/.test(rest)) return undefined;
  const name = rest.toLowerCase().replaceAll('_', '-');
  return FEED_SOURCE_NAME.test(name) ? name : undefined;
}

/** Most secrets one tenant may hold for one source: the current one and the next, while it rotates. */
export const MAX_SECRETS_PER_TENANT = 2;

/** A source's secrets as tenant and secret pairs (a plain string is the default tenant's). */
export function tenantSecrets(secrets: string | readonly TenantSecret[]): readonly TenantSecret[] {
  return typeof secrets === 'string' ? [{ tenant: DEFAULT_TENANT, secret: secrets }] : secrets;
}

/** A problem with one variable: the variable and what is wrong (never its value). */
export interface SecretProblem {
  variable: string;
  message: string;
}

const BAD_WHSEC = 'a secret starting whsec_ (Standard Webhooks) must be followed by its key in base64';

/** Whether a secret is a `whsec_` one whose key is not base64 (the Standard Webhooks verifier could not use it). */
function isBadStandardWebhooksSecret(secret: string): boolean {
  try {
    standardWebhooksKey(secret);
    return false;
  } catch {
    return true;
  }
}

/**
 * Reads every `CTXFLOW_FEED_SECRET_<NAME>` variable (unset or empty: the feed
 * is off). A built-in source's variable switches that feed on; any other name
 * configures a source of that name speaking the generic feed's format at
 * `/feeds/<name>`. A variable whose name is not a source name (after the
 * prefix: upper-case letters, digits and `_`, 1 to 32 characters) is refused.
 *
 * - `CTXFLOW_API_KEYS` unset (one tenant, loopback only): the value is one
 *   plain secret, as it is, of DEFAULT_TENANT.
 * - `CTXFLOW_API_KEYS`, `CTXFLOW_API_KEYS_FILE` or `CTXFLOW_OIDC_ISSUER` set: the value is a comma-separated list of
 *   `tenant:secret` pairs (`ta:secret-a,tb:secret-b`); the secret that
 *   verifies a delivery names its tenant. Refused, each problem naming its
 *   variable: a plain secret (no tenant), an empty tenant or secret, a tenant
 *   without a key in `CTXFLOW_API_KEYS` (unless a key file or tokens name the
 *   tenants), one secret given to two tenants, and
 *   more than MAX_SECRETS_PER_TENANT secrets for one tenant. A tenant may have
 *   two (rotation): either verifies, and names that tenant.
 *
 * In both forms a secret starting `whsec_` (Standard Webhooks) must be
 * followed by its key in base64.
 *
 * A malformed `CTXFLOW_API_KEYS` is the caller's problem to report (its
 * parse names it); the tenant check is then skipped.
 */
export function readFeedSecrets(env: Readonly<Record<string, unknown>>): {
  secrets: Partial<Record<FeedSource, readonly TenantSecret[]>>;
  problems: SecretProblem[];
} {
  const secrets: Partial<Record<FeedSource, readonly TenantSecret[]>> = {};
  const problems: SecretProblem[] = [];
  const rawKeys = typeof env.CTXFLOW_API_KEYS === 'string' ? env.CTXFLOW_API_KEYS.trim() : undefined;
  let tenants: ReadonlySet<string> | undefined;
  try {
    tenants = new Set(parseApiKeys(rawKeys).values());
  } catch {
    tenants = undefined;
  }
  // Tenants named by a key file or a token are not known at startup: only CTXFLOW_API_KEYS's are checked.
  const openTenants = [env.CTXFLOW_API_KEYS_FILE, env.CTXFLOW_OIDC_ISSUER].some(
    (v) => typeof v === 'string' && v.trim() !== '',
  );
  if (openTenants) tenants = undefined;
  const multiTenant = Boolean(rawKeys) || openTenants;
  for (const variable of Object.keys(env).sort()) {
    if (!variable.startsWith(FEED_SECRET_PREFIX)) continue;
    const value = env[variable];
    if (typeof value !== 'string' || value === '') continue;
    const source = feedSourceOfVar(variable);
    if (source === undefined) {
      problems.push({
        variable,
        message:
          'not a feed source name: after CTXFLOW_FEED_SECRET_ use 1 to 32 upper-case letters, digits and _ ' +
          '(the route is /feeds/<name in lower case, _ as ->)',
      });
      continue;
    }
    const problem = (message: string) => problems.push({ variable, message });
    if (!multiTenant) {
      if (isBadStandardWebhooksSecret(value)) problem(BAD_WHSEC);
      else secrets[source] = Object.freeze([{ tenant: DEFAULT_TENANT, secret: value }]);
      continue;
    }
    const pairs: TenantSecret[] = [];
    for (const entry of value.split(',')) {
      const trimmed = entry.trim();
      const colon = trimmed.indexOf(':');
      if (colon < 0) {
        problem(
          'with CTXFLOW_API_KEYS set, expected a list of tenant:secret pairs (e.g. ta:secret-a,tb:secret-b); ' +
            'a plain secret names no tenant',
        );
        continue;
      }
      const tenant = trimmed.slice(0, colon);
      const secret = trimmed.slice(colon + 1);
      if (tenant === '' || secret === '') {
        problem('each entry must be tenant:secret, with neither part empty');
        continue;
      }
      if (tenant.length > MAX_TENANT_LENGTH) {
        problem(`a tenant is longer than ${MAX_TENANT_LENGTH} characters (the TicketUpdate's limit)`);
        continue;
      }
      if (tenants && !tenants.has(tenant)) {
        problem(`tenant "${tenant}" has no key in CTXFLOW_API_KEYS (a plain secret containing ":" is refused too)`);
        continue;
      }
      const other = pairs.find((p) => p.secret === secret && p.tenant !== tenant);
      if (other) {
        problem(`one secret is given to tenants "${other.tenant}" and "${tenant}": a secret must name one tenant`);
        continue;
      }
      if (isBadStandardWebhooksSecret(secret)) {
        problem(`tenant "${tenant}": ${BAD_WHSEC}`);
        continue;
      }
      if (pairs.some((p) => p.secret === secret)) continue;
      if (pairs.filter((p) => p.tenant === tenant).length >= MAX_SECRETS_PER_TENANT) {
        problem(
          `tenant "${tenant}" has more than ${MAX_SECRETS_PER_TENANT} secrets: ` +
            'at most two per tenant (the current one and the next, while it rotates)',
        );
        continue;
      }
      pairs.push(Object.freeze({ tenant, secret }));
    }
    if (pairs.length > 0) secrets[source] = Object.freeze(pairs);
  }
  return { secrets, problems };
}

/**
 * A config schema's refinement: every problem of the feed secrets as an issue
 * naming its variable. Add it with `REFINE_ALWAYS` (service-kit) so it runs even when
 * other variables failed: every problem is reported at once.
 */
export function refineFeedSecrets(env: Readonly<Record<string, unknown>>, ctx: z.RefinementCtx): void {
  for (const { variable, message } of readFeedSecrets(env).problems) {
    ctx.addIssue({ code: 'custom', path: [variable], message });
  }
}
