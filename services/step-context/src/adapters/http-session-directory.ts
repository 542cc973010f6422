import { CtxflowError } from '@ctxflow/contracts';
import { DEFAULT_TENANT } from '@ctxflow/service-kit';
import type { SessionDirectory } from '../ports/session-directory.ts';

/**
 * The session directory of the stack: asks the session-runner
 * (`GET <runnerUrl>/sessions/:sessionId`) with each configured tenant's API key
 * in turn; the tenant whose key gets 200 owns the session. Without API keys
 * there is one tenant (`default`) and one unauthenticated call. A 404 for every
 * tenant means no such session; any other answer, or none, is a retryable
 * 503 `store_unavailable`. Owners never change, so a found owner is
 * remembered for `cacheMs`.
 */
export class HttpSessionDirectory implements SessionDirectory {
  readonly #runnerUrl: string;
  readonly #keysByTenant: [tenant: string, key: string | undefined][];
  readonly #cacheMs: number;
  readonly #cache = new Map<string, { tenant: string; until: number }>();

  /** `apiKeys`: key -> tenant, as parsed from CTXFLOW_API_KEYS (service-kit parseApiKeys). */
  constructor(options: { runnerUrl: string; apiKeys: Map<string, string>; cacheMs?: number }) {
    this.#runnerUrl = options.runnerUrl.replace(/\/+$/, '');
    const byTenant = new Map<string, string>();
    for (const [key, tenant] of options.apiKeys) if (!byTenant.has(tenant)) byTenant.set(tenant, key);
    this.#keysByTenant = byTenant.size > 0 ? [...byTenant] : [[DEFAULT_TENANT, undefined]];
    this.#cacheMs = options.cacheMs ?? 600_000;
  }

  async tenantOf(sessionId: string): Promise<string | undefined> {
    const cached = this.#cache.get(sessionId);
    if (cached && cached.until > Date.now()) return cached.tenant;
    for (const [tenant, key] of this.#keysByTenant) {
      let response: Response;
      try {
        response = await fetch(`${this.#runnerUrl}/sessions/${encodeURIComponent(sessionId)}`, {
          headers: key === undefined ? {} : { authorization: `Bearer ${key}` },
          signal: AbortSignal.timeout(5_000),
        });
      } catch (cause) {
        throw new CtxflowError('store_unavailable', 'the session-runner did not answer a session lookup', { cause });
      }
      await response.body?.cancel();
      if (response.status === 200) {
        if (this.#cache.size > 10_000) this.#cache.clear();
        this.#cache.set(sessionId, { tenant, until: Date.now() + this.#cacheMs });
        return tenant;
      }
      if (response.status !== 404)
        throw new Error(`session-runner answered HTTP ${response.status} for a session lookup`);
    }
    return undefined;
  }
}
