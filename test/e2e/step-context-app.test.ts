import { DEFAULT_TENANT } from '@ctxflow/contracts';
import { createAuthenticator } from '@ctxflow/service-kit';
import { HttpStepContext } from '@ctxflow/session-runner';
import {
  buildStepContextApp,
  FeedStepContext,
  HttpSessionDirectory,
  loadStepContextConfig,
  MemoryBatchStore,
  MemorySubscriptionStore,
} from '@ctxflow/step-context';
import { describe, expect, it } from 'vitest';
import { runHook } from '../../services/session-runner/src/domain/hook-batch.ts';
import { renderNotice } from '../../services/step-context/src/domain/render-notice.ts';
import { makeUpdate } from '../../services/step-context/test/helpers.ts';
import { createHarness } from '../support/harness.ts';

describe('step-context as its own process', () => {
  it('POST /step-context serves the runner HttpStepContext: 200 batch within maxBytes, 204 when nothing is new', async () => {
    const subscriptions = new MemorySubscriptionStore();
    const batches = new MemoryBatchStore({ subscriptions });
    const app = buildStepContextApp({
      subscriptions,
      feed: new FeedStepContext({ batches, subscriptions }),
      directory: { tenantOf: async () => undefined },
      authenticate: createAuthenticator(new Map()),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const { port } = app.server.address() as { port: number };
      const hook = new HttpStepContext(`http://127.0.0.1:${port}/step-context`);
      const u = makeUpdate({ ticket: 'INC-1' });
      await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: 'INC-1' });
      await batches.append(u);
      const limits = { maxBytes: 32 * 1024, timeoutMs: 5_000 };
      expect(await runHook(hook, { sessionId: 's1', cursor: undefined }, limits)).toEqual({
        type: 'batch',
        items: [{ kind: 'notice', source: 'hook', content: renderNotice([u]) }],
        leftOut: 0,
        cursor: { v: 2, p: { generic: 1 } },
      });
      const cursor = { v: 2, p: { generic: 1 } };
      expect(await runHook(hook, { sessionId: 's1', cursor }, limits)).toEqual({ type: 'none' });
      const bad = await app.inject({ method: 'POST', url: '/step-context', payload: { cursor: 1 } });
      expect(bad.statusCode).toBe(400);
      expect(bad.json().error.code).toBe('validation_error');
    } finally {
      await app.close();
    }
  });

  it('HttpSessionDirectory finds the owning tenant through the runner API', async () => {
    const apiKeys = new Map([
      ['key-acme', 'acme'],
      ['key-globex', 'globex'],
    ]);
    const runner = await createHarness({ apiKeys });
    await runner.app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const { port } = runner.app.server.address() as { port: number };
      const created = await runner.call('POST', '/sessions', {}, { authorization: 'Bearer key-globex' });
      expect(created.status).toBe(201);
      const directory = new HttpSessionDirectory({ runnerUrl: `http://127.0.0.1:${port}/`, apiKeys });
      expect(await directory.tenantOf(created.body.sessionId)).toBe('globex');
      expect(await directory.tenantOf('no-such-session')).toBeUndefined();
    } finally {
      await runner.app.close();
    }
    // A runner that does not answer: retryable 503, never a 404 that would hide the session.
    const gone = new HttpSessionDirectory({ runnerUrl: 'http://127.0.0.1:1', apiKeys });
    await expect(gone.tenantOf('s')).rejects.toMatchObject({ code: 'store_unavailable', status: 503, retryable: true });
  });

  it('configuration: defaults, and every problem at once', () => {
    const config = loadStepContextConfig({});
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 8082,
      runnerUrl: 'http://127.0.0.1:8080',
      redisPrefix: 'ctxflow',
      kafkaBrokers: undefined,
      redisUrl: undefined,
    });
    expect(() =>
      loadStepContextConfig({ CTXFLOW_STEP_CONTEXT_PORT: 'x', REDIS_URL: 'http://nope', CTXFLOW_API_KEYS: 'bad' }),
    ).toThrow(/CTXFLOW_STEP_CONTEXT_PORT[\s\S]*REDIS_URL[\s\S]*CTXFLOW_API_KEYS/);
  });
});
