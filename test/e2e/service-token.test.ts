/**
 * Service credentials (`CTXFLOW_SERVICE_TOKEN_FILE`): the session-runner calls step-context's
 * `POST /step-context` with the service token, never a tenant's key; step-context refuses any
 * other bearer; a token rotates through the file with no restart.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_TENANT } from '@ctxflow/contracts';
import { type ConfigError, createAuthenticator, ServiceTokens } from '@ctxflow/service-kit';
import { HttpStepContext, loadRunnerConfig } from '@ctxflow/session-runner';
import { buildStepContextApp, FeedStepContext, loadStepContextConfig, MemoryFeedStreams } from '@ctxflow/step-context';
import { MemorySubscriptionStore } from '@ctxflow/subscriptions';
import { describe, expect, it } from 'vitest';
import { makeUpdate } from '../../services/step-context/test/helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'ctxflow-service-token-'));
const file = join(dir, 'service-token');
const OLD = 'old-service-token-0123456789abcdef-0123';
const NEW = 'new-service-token-0123456789abcdef-0123';
const TENANT_KEY = 'a-tenant-api-key-0123456789abcdef';

describe('CTXFLOW_SERVICE_TOKEN_FILE', () => {
  it('the runner reaches step-context with the token; no token, a wrong one or a tenant key is 401; rotation needs no restart', async () => {
    writeFileSync(file, `# the runner sends the first line; step-context takes any\n${OLD}\n`);
    const subscriptions = new MemorySubscriptionStore();
    const feedStreams = new MemoryFeedStreams({ subscriptions });
    const config = loadStepContextConfig({ CTXFLOW_SERVICE_TOKEN_FILE: file, CTXFLOW_API_KEYS: `t:${TENANT_KEY}` });
    const app = buildStepContextApp({
      subscriptions,
      feed: new FeedStepContext({ feedStreams, subscriptions }),
      authenticate: createAuthenticator(config.apiKeys),
      ...(config.serviceTokens ? { serviceTokens: config.serviceTokens } : {}),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}/step-context`;
      await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: 'INC-1' });
      await feedStreams.append(makeUpdate({ ticket: 'INC-1' }));
      const request = { sessionId: 's1', cursor: undefined, maxBytes: 32 * 1024, signal: AbortSignal.timeout(5_000) };

      const runner = new ServiceTokens(file);
      const answer = (await new HttpStepContext(url, () => runner.current()).fetch(request)) as { items: unknown[] };
      expect(answer.items).toHaveLength(1);
      for (const token of [undefined, TENANT_KEY, 'x'.repeat(40)]) {
        const hook = new HttpStepContext(url, token === undefined ? undefined : () => token);
        await expect(hook.fetch(request)).rejects.toThrow('stepContext hook answered HTTP 401');
      }
      const refused = await app.inject({ method: 'POST', url: '/step-context', payload: { sessionId: 's1' } });
      expect(refused.json()).toEqual({
        error: {
          code: 'unauthorized',
          message: 'this route takes the service token (CTXFLOW_SERVICE_TOKEN_FILE)',
          retryable: false,
        },
      });

      // Rotation: the new token beside the old, the runner moves to it, then the old one goes.
      writeFileSync(file, `${NEW}\n${OLD}\n`);
      expect(runner.current()).toBe(NEW);
      expect(config.serviceTokens?.accepts(OLD)).toBe(true);
      expect(await new HttpStepContext(url, () => runner.current()).fetch(request)).toMatchObject({
        items: [expect.anything()],
      });
      writeFileSync(file, `${NEW}\n`);
      await expect(new HttpStepContext(url, () => OLD).fetch(request)).rejects.toThrow('HTTP 401');
      expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await app.close();
    }
  });

  it('a missing, empty or short token file stops the start naming the file, never a token', () => {
    const problems = (load: () => unknown) => {
      try {
        load();
      } catch (err) {
        return (err as ConfigError).problems;
      }
      return [];
    };
    writeFileSync(file, 'short-token\n');
    expect(problems(() => loadRunnerConfig({ CTXFLOW_SERVICE_TOKEN_FILE: file }))).toEqual([
      `CTXFLOW_SERVICE_TOKEN_FILE: ${file}: token 1 is shorter than 32 characters or has a space`,
    ]);
    writeFileSync(file, '# nothing\n');
    expect(problems(() => loadStepContextConfig({ CTXFLOW_SERVICE_TOKEN_FILE: file }))).toEqual([
      `CTXFLOW_SERVICE_TOKEN_FILE: ${file}: no token in it`,
    ]);
    expect(problems(() => loadRunnerConfig({ CTXFLOW_SERVICE_TOKEN_FILE: join(dir, 'absent') }))).toEqual([
      `CTXFLOW_SERVICE_TOKEN_FILE: ${join(dir, 'absent')}: cannot be read (ENOENT)`,
    ]);
  });
});
