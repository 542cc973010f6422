import { DEFAULT_TENANT } from '@ctxflow/contracts';
import { createAuthenticator } from '@ctxflow/service-kit';
import { HttpStepContext, RedisSessionStore } from '@ctxflow/session-runner';
import { buildStepContextApp, FeedStepContext, loadStepContextConfig, MemoryFeedStreams } from '@ctxflow/step-context';
import { MemorySubscriptionStore, RedisSessionDirectory, RedisSubscriptionStore } from '@ctxflow/subscriptions';
import { Redis } from 'ioredis';
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { runHook } from '../../services/session-runner/src/domain/hook-batch.ts';
import { renderNotice } from '../../services/step-context/src/domain/render-notice.ts';
import { deleteKeys, makeUpdate, uniquePrefix } from '../../services/step-context/test/helpers.ts';
import { createHarness } from '../support/harness.ts';
import { requireRedis } from '../support/services.ts';

describe('step-context as its own process', () => {
  it('POST /step-context serves the runner HttpStepContext: 200 batch within maxBytes, 204 when nothing is new', async () => {
    const subscriptions = new MemorySubscriptionStore();
    const feedStreams = new MemoryFeedStreams({ subscriptions });
    const app = buildStepContextApp({
      subscriptions,
      feed: new FeedStepContext({ feedStreams, subscriptions }),
      directory: { tenantOf: async () => undefined },
      authenticate: createAuthenticator(new Map()),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const { port } = app.server.address() as { port: number };
      const hook = new HttpStepContext(`http://127.0.0.1:${port}/step-context`);
      const u = makeUpdate({ ticket: 'INC-1' });
      await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: 'INC-1' });
      await feedStreams.append(u);
      const limits = { maxBytes: 32 * 1024, timeoutMs: 5_000 };
      expect(await runHook(hook, { sessionId: 's1', cursor: undefined }, limits)).toEqual({
        type: 'batch',
        items: [
          {
            kind: 'notice',
            source: 'hook',
            content: renderNotice([u]),
            ticketUpdates: [{ source: 'generic', eventId: u.eventId }],
          },
        ],
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

  it("a session's owner: one Redis call per lookup with 1,000 tenants configured, no tenant key, no HTTP", async () => {
    const url = requireRedis();
    const prefix = uniquePrefix();
    const redis = new Redis(url);
    const ownerClient = new Redis(url);
    onTestFinished(async () => {
      await deleteKeys(redis, prefix);
      redis.disconnect();
      ownerClient.disconnect();
    });
    const apiKeys = new Map(Array.from({ length: 1_000 }, (_, i) => [`key-${i}`, `tenant-${i}`]));
    // The runner records its sessions on Redis, as on the stack (same prefix as step-context).
    const runner = await createHarness({ apiKeys, store: new RedisSessionStore(redis, { prefix }) });
    const owned = new Map<string, string>();
    for (const i of [0, 737, 999]) {
      const created = await runner.call('POST', '/sessions', {}, { authorization: `Bearer key-${i}` });
      expect(created.status).toBe(201);
      owned.set(created.body.sessionId, `tenant-${i}`);
    }
    await runner.app.close();

    // Every command the directory sends, on a client of its own.
    const sent: string[] = [];
    const sendCommand = ownerClient.sendCommand.bind(ownerClient);
    ownerClient.sendCommand = ((command: { name: string }, stream?: never) => {
      sent.push(command.name);
      return sendCommand(command as never, stream);
    }) as typeof ownerClient.sendCommand;
    const fetchSpy = vi.spyOn(globalThis, 'fetch');
    const directory = new RedisSessionDirectory({ redis: ownerClient, prefix });
    await directory.tenantOf('warm-up'); // the first call may load the script (EVALSHA, then EVAL on NOSCRIPT)
    sent.length = 0;

    for (const [sessionId, tenant] of owned) {
      expect(await directory.tenantOf(sessionId)).toBe(tenant);
    }
    expect(await directory.tenantOf('no-such-session')).toBeUndefined();
    expect(sent).toEqual(['evalsha', 'evalsha', 'evalsha', 'evalsha']);

    // Through step-context's subscription routes: one directory call per request.
    const subscriptions = new RedisSubscriptionStore({ redis, prefix });
    const app = buildStepContextApp({
      subscriptions,
      feed: new FeedStepContext({ feedStreams: new MemoryFeedStreams(), subscriptions }),
      directory,
      authenticate: createAuthenticator(apiKeys),
    });
    try {
      const [sessionId] = [...owned].find(([, tenant]) => tenant === 'tenant-737')!;
      const subscribe = (key: string, id: string) =>
        app.inject({
          method: 'POST',
          url: `/sessions/${id}/subscriptions`,
          headers: { authorization: `Bearer ${key}` },
          payload: { source: 'generic', ticket: 'T-1' },
        });
      sent.length = 0;
      expect((await subscribe('key-737', sessionId)).statusCode).toBe(201);
      expect(sent).toEqual(['evalsha']);
      // Another tenant's session, and none at all: the same 404, one call each.
      expect((await subscribe('key-12', sessionId)).json().error.code).toBe('state_session_not_found');
      expect((await subscribe('key-737', 'no-such-session')).json().error.code).toBe('state_session_not_found');
      expect(sent).toEqual(['evalsha', 'evalsha', 'evalsha']);
      expect(fetchSpy).not.toHaveBeenCalled();
    } finally {
      await app.close();
      fetchSpy.mockRestore();
    }

    // A Redis that does not answer: retryable 503, never a 404 that would hide the session.
    const gone = new Redis({ port: 1, lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null });
    const unreachable = new RedisSessionDirectory({ redis: gone, prefix });
    await expect(unreachable.tenantOf('s')).rejects.toMatchObject({
      code: 'store_unavailable',
      status: 503,
      retryable: true,
    });
    gone.disconnect();
  });

  it('configuration: defaults, and every problem at once', () => {
    const config = loadStepContextConfig({});
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 8082,
      redisPrefix: 'ctxflow',
      kafkaBrokers: undefined,
      redisUrl: undefined,
    });
    expect(() =>
      loadStepContextConfig({ CTXFLOW_STEP_CONTEXT_PORT: 'x', REDIS_URL: 'http://nope', CTXFLOW_API_KEYS: 'bad' }),
    ).toThrow(/CTXFLOW_STEP_CONTEXT_PORT[\s\S]*REDIS_URL[\s\S]*CTXFLOW_API_KEYS/);
  });
});
