/**
 * Per-tenant limits on the stack: a request rate (`CTXFLOW_RATE_LIMIT_PER_MINUTE`) counted
 * in Redis by @fastify/rate-limit, so two runner replicas on one Redis share one count per
 * tenant (not per address), and a cap on live sessions (`CTXFLOW_TENANT_MAX_SESSIONS`),
 * counted in the session store, memory and Redis.
 */
import { randomUUID } from 'node:crypto';
import { createAuthenticator } from '@ctxflow/service-kit';
import {
  buildRunnerApp,
  createEngine,
  loadRunnerConfig,
  MemorySessionStore,
  type SessionStore,
} from '@ctxflow/session-runner';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { RedisSessionStore } from '../../services/session-runner/src/adapters/redis-session-store.ts';
import { requireRedis } from '../support/services.ts';

const KEYS = new Map([
  ['limits-key-a', 'ta'],
  ['limits-key-b', 'tb'],
]);
const prefix = `limits-${randomUUID().slice(0, 8)}`;
const clients: Redis[] = [];
const apps: FastifyInstance[] = [];

function redis(): Redis {
  const client = new Redis(requireRedis(), { maxRetriesPerRequest: 2 });
  clients.push(client);
  return client;
}

afterAll(async () => {
  for (const app of apps) await app.close();
  const keys = await clients[0]!.keys(`${prefix}*`);
  if (keys.length > 0) await clients[0]!.del(...keys);
  for (const client of clients) client.disconnect();
});

async function replica(options: { perMinute?: number; maxSessions?: number; store?: SessionStore }) {
  const app = buildRunnerApp({
    engine: createEngine({ store: options.store ?? new MemorySessionStore() }),
    authenticate: createAuthenticator(KEYS),
    limits: {
      ...(options.perMinute ? { rate: { perMinute: options.perMinute, redis: redis(), prefix } } : {}),
      ...(options.maxSessions ? { maxSessions: options.maxSessions } : {}),
    },
  });
  await app.ready();
  apps.push(app);
  return app;
}

async function call(app: FastifyInstance, method: 'GET' | 'POST' | 'DELETE', url: string, key: string, body?: object) {
  const response = await app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${key}` },
    ...(body ? { payload: body } : {}),
  });
  return { status: response.statusCode, headers: response.headers, body: response.body ? response.json() : undefined };
}

describe('per-tenant limits', () => {
  it('two replicas on one Redis share each tenant’s count; over it 429 rate_limited with Retry-After; the other tenant goes on', async () => {
    const [one, two] = [await replica({ perMinute: 5 }), await replica({ perMinute: 5 })];
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++)
      statuses.push((await call(i % 2 ? two : one, 'GET', '/sessions', 'limits-key-a')).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    for (const app of [one, two]) {
      const limited = await call(app, 'POST', '/sessions', 'limits-key-a', {});
      expect(limited.status).toBe(429);
      expect(limited.body).toEqual({
        error: {
          code: 'rate_limited',
          message: expect.stringMatching(
            /^over 5 requests a minute for this tenant \(CTXFLOW_RATE_LIMIT_PER_MINUTE\); retry in \d+ s$/,
          ),
          retryable: true,
        },
      });
      const retryAfter = Number(limited.headers['retry-after']);
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(60);
    }
    // Nothing was written by the refused creations.
    expect((await call(one, 'GET', '/sessions', 'limits-key-b')).body).toEqual({ sessions: [] });
    // The other tenant has its own count, on both replicas; the health routes are never limited.
    for (const app of [one, two, one]) expect((await call(app, 'GET', '/sessions', 'limits-key-b')).status).toBe(200);
    expect((await one.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    // The count is the tenant's, in Redis under the prefix, whatever address the requests came from.
    const counted = await clients[0]!.keys(`${prefix}:rate-limit:*`);
    expect(counted.sort()).toEqual([`${prefix}:rate-limit:ta`, `${prefix}:rate-limit:tb`]);
  });

  it.each([
    ['memory', () => new MemorySessionStore()],
    ['Redis', () => new RedisSessionStore(redis(), { prefix: `${prefix}-store` })],
  ])(
    'CTXFLOW_TENANT_MAX_SESSIONS on %s: a session over the cap is 429 quota_exceeded, nothing written',
    async (_name, store) => {
      const app = await replica({ maxSessions: 2, store: store() });
      const a1 = await call(app, 'POST', '/sessions', 'limits-key-a', {});
      const a2 = await call(app, 'POST', '/sessions', 'limits-key-a', {});
      expect([a1.status, a2.status]).toEqual([201, 201]);
      const over = await call(app, 'POST', '/sessions', 'limits-key-a', {});
      expect(over).toMatchObject({
        status: 429,
        body: {
          error: {
            code: 'quota_exceeded',
            message: 'the tenant has 2 live sessions, its cap (CTXFLOW_TENANT_MAX_SESSIONS): erase one first',
            retryable: false,
          },
        },
      });
      expect(over.headers['retry-after']).toBeUndefined();
      const step = await call(app, 'POST', `/sessions/${a1.body.sessionId}/steps`, 'limits-key-a', {});
      const branch = await call(app, 'POST', `/sessions/${a1.body.sessionId}/branches`, 'limits-key-a', {
        atStepId: step.body.stepId,
      });
      expect(branch.body.error.code).toBe('quota_exceeded');
      expect((await call(app, 'GET', '/sessions', 'limits-key-a')).body.sessions).toHaveLength(2);
      // Another tenant has its own cap; an erased session frees its place.
      expect((await call(app, 'POST', '/sessions', 'limits-key-b', {})).status).toBe(201);
      expect((await call(app, 'DELETE', `/sessions/${a2.body.sessionId}`, 'limits-key-a')).status).toBe(204);
      expect((await call(app, 'POST', '/sessions', 'limits-key-a', {})).status).toBe(201);
    },
  );

  it('the variables are read and checked', () => {
    const config = loadRunnerConfig({ CTXFLOW_RATE_LIMIT_PER_MINUTE: '600', CTXFLOW_TENANT_MAX_SESSIONS: '50' });
    expect([config.ratePerMinute, config.maxSessions]).toEqual([600, 50]);
    expect(() => loadRunnerConfig({ CTXFLOW_RATE_LIMIT_PER_MINUTE: '0', CTXFLOW_TENANT_MAX_SESSIONS: 'many' })).toThrow(
      /CTXFLOW_RATE_LIMIT_PER_MINUTE[\s\S]*CTXFLOW_TENANT_MAX_SESSIONS/,
    );
  });
});
