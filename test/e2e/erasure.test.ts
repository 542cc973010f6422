/**
 * Issue 13 "Data lifecycle", through the HTTP API of the embedded app: DELETE of a session
 * erases it in every store (and a later webhook for its ticket brings nothing back), DELETE
 * of an agent is refused while it has sessions unless `?cascade=true`. On memory, and on the
 * same app over Redis and Redis Cluster stores, where a SCAN of the session's hash tag finds
 * no key left.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { TOPICS } from '@ctxflow/contracts';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { createEngine, RedisSessionStore } from '@ctxflow/session-runner';
import { RedisFeedStreams } from '@ctxflow/step-context';
import { RedisSubscriptionStore } from '@ctxflow/subscriptions';
import { Cluster, Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { deleteKeys, entriesOf, keysOfSession } from '../../services/step-context/test/helpers.ts';
import { requireRedis, requireRedisCluster } from '../support/services.ts';

const SECRET = 'erase-secret';
const KEYS = new Map([
  ['key-a', 'tenant-a'],
  ['key-b', 'tenant-b'],
]);

function signed(body: object) {
  const raw = JSON.stringify(body);
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = createHmac('sha256', SECRET).update(`${ts}.${raw}`).digest('hex');
  return {
    payload: raw,
    headers: { 'content-type': 'application/json', 'x-ctxflow-timestamp': ts, 'x-ctxflow-signature': `sha256=${sig}` },
  };
}

type Backend = { name: string; open(): Promise<{ client?: Redis | Cluster; prefix?: string }> };

const clients: (Redis | Cluster)[] = [];
afterAll(async () => {
  for (const client of clients) await client.quit();
});

const BACKENDS: Backend[] = [
  { name: 'memory', open: async () => ({}) },
  {
    name: 'redis',
    open: async () => {
      const client = new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
      clients.push(client);
      return { client, prefix: `erase-${randomUUID().slice(0, 12)}` };
    },
  },
  {
    name: 'redis cluster',
    open: async () => {
      const client = new Cluster(requireRedisCluster(), { redisOptions: { maxRetriesPerRequest: 3 } });
      clients.push(client);
      return { client, prefix: `erase-${randomUUID().slice(0, 12)}` };
    },
  },
];

let embedded: EmbeddedApp | undefined;
let cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await embedded?.close();
  embedded = undefined;
  for (const cleanup of cleanups) await cleanup();
  cleanups = [];
});

async function setup(backend: Backend) {
  const { client, prefix } = await backend.open();
  const stores =
    client && prefix
      ? {
          sessions: new RedisSessionStore(client, { prefix }),
          feedStreams: new RedisFeedStreams({ redis: client, prefix }),
          subscriptions: new RedisSubscriptionStore({ redis: client, prefix }),
        }
      : undefined;
  if (client && prefix) cleanups.push(() => deleteKeys(client, prefix));
  embedded = await buildEmbeddedApp({
    config: { apiKeys: KEYS, secrets: { generic: [{ tenant: 'tenant-a', secret: SECRET }] } },
    ...(stores ? { stores } : {}),
  });
  const app = embedded.app;
  const call = async (method: 'GET' | 'POST' | 'DELETE', url: string, body?: object, key = 'key-a') => {
    const res = await app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${key}` },
      ...(body ? { payload: body } : {}),
    });
    return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
  };
  let published = 0;
  /** Posts a signed update and waits until step-context consumed it. */
  const post = async (update: object) => {
    const res = await app.inject({ method: 'POST', url: '/feeds/generic', ...signed(update) });
    expect(res.statusCode).toBe(202);
    published++;
    for (let i = 0; i < 400; i++) {
      const at = await embedded!.feedStreams.resumeFrom(TOPICS.ticketUpdates, 0);
      if (at !== undefined && BigInt(at) >= BigInt(published)) return;
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error('update was not applied');
  };
  /** Every key of the session's hash tag on Redis (none on memory: there is nothing to scan). */
  const keysOf = async (sessionId: string) => (client && prefix ? keysOfSession(client, prefix, sessionId) : []);
  /** What the session's streams hold for it from where its subscriptions started (nothing once erased). */
  const pending = (sessionId: string) => entriesOf(embedded!, sessionId);
  return { call, post, keysOf, pending, redis: Boolean(client) };
}

for (const backend of BACKENDS) {
  describe(`data lifecycle over HTTP: ${backend.name}`, () => {
    it('DELETE /sessions/:id erases every store; a later webhook brings nothing back; branches stay', async () => {
      const { call, post, keysOf, pending, redis } = await setup(backend);
      const ticket = `T-${randomUUID().slice(0, 8)}`;
      const agentId = (await call('POST', '/agents', {})).body.agentId;
      const session = (await call('POST', '/sessions', { agentId })).body.sessionId;
      expect((await call('POST', `/sessions/${session}/subscriptions`, { source: 'generic', ticket })).status).toBe(
        201,
      );
      await post({ eventId: 'e-1', ticket, summary: 'first news', version: 1 });
      const step = (await call('POST', `/sessions/${session}/steps`, { requestId: 'req-1' })).body;
      expect(step.rows).toHaveLength(1);
      await call('POST', `/sessions/${session}/messages`, { role: 'user', content: 'hello' });
      const branch = (await call('POST', `/sessions/${session}/branches`, {})).body.sessionId;
      // A pending batch: applied, not yet delivered by a step.
      await post({ eventId: 'e-2', ticket, summary: 'second news', version: 2 });
      expect((await pending(session)).length).toBe(2);
      if (redis) expect((await keysOf(session)).length).toBeGreaterThan(0);

      // Another tenant's DELETE answers as an erased session's and touches nothing.
      expect((await call('DELETE', `/sessions/${session}`, undefined, 'key-b')).status).toBe(204);
      expect((await call('GET', `/sessions/${session}`)).status).toBe(200);

      expect((await call('DELETE', `/sessions/${session}`)).status).toBe(204);
      expect((await call('DELETE', `/sessions/${session}`)).status).toBe(204); // idempotent
      const gone = await call('GET', `/sessions/${session}`);
      expect(gone.status).toBe(404);
      expect(gone.body.error.code).toBe('state_session_not_found');
      expect((await call('GET', `/sessions/${session}/subscriptions`)).status).toBe(404);
      expect((await call('POST', `/sessions/${session}/steps`, {})).status).toBe(404);
      expect(
        (await call('POST', '/context', { sessionId: session, items: [{ kind: 'notice', content: 'x' }] })).status,
      ).toBe(404);
      expect((await call('GET', `/sessions/${session}/messages`)).status).toBe(404);
      const replay = await call('GET', `/sessions/${session}/stream?follow=false`);
      expect(replay.status).toBe(404);
      expect((await call('GET', '/sessions')).body.sessions.map((s: { sessionId: string }) => s.sessionId)).toEqual([
        branch,
      ]);
      expect(await pending(session)).toEqual([]);
      expect(await keysOf(session)).toEqual([]);

      // A later webhook for its ticket: the branch (a session of its own) gets it, the erased one nothing.
      await post({ eventId: 'e-3', ticket, summary: 'third news', version: 3 });
      expect(await pending(session)).toEqual([]);
      expect(await keysOf(session)).toEqual([]);
      expect((await pending(branch)).map((e) => e.update.summary)).toContain('third news');
      expect((await call('GET', `/sessions/${branch}/subscriptions`)).body).toMatchObject({
        subscriptions: [{ source: 'generic', ticket }],
      });
      const branchStep = (await call('POST', `/sessions/${branch}/steps`, {})).body;
      expect(branchStep.rows[0].content).toContain('third news');
    });

    it('DELETE /agents/:id is refused while sessions of it exist, unless ?cascade=true', async () => {
      const { call, post, keysOf, pending } = await setup(backend);
      const ticket = `T-${randomUUID().slice(0, 8)}`;
      const agentId = (await call('POST', '/agents', {})).body.agentId;
      expect((await call('POST', `/agents/${agentId}/memories`, { content: 'prefers short answers' })).status).toBe(
        201,
      );
      const a = (await call('POST', '/sessions', { agentId })).body.sessionId;
      const b = (await call('POST', '/sessions', { agentId })).body.sessionId;
      const unrelated = (await call('POST', '/sessions', {})).body.sessionId;
      await call('POST', `/sessions/${a}/subscriptions`, { source: 'generic', ticket });
      await post({ eventId: 'a-1', ticket, summary: 'news for a' });

      const refused = await call('DELETE', `/agents/${agentId}`);
      expect(refused.status).toBe(409);
      expect(refused.body.error).toMatchObject({ code: 'state_agent_in_use', retryable: false });
      expect((await call('GET', `/agents/${agentId}`)).status).toBe(200);
      expect((await call('DELETE', `/agents/${agentId}?cascade=maybe`)).status).toBe(400);
      expect((await call('DELETE', `/agents/${agentId}`, undefined, 'key-b')).status).toBe(204);
      expect((await call('GET', `/agents/${agentId}`)).status).toBe(200);

      expect((await call('DELETE', `/agents/${agentId}?cascade=true`)).status).toBe(204);
      expect((await call('DELETE', `/agents/${agentId}?cascade=true`)).status).toBe(204);
      expect((await call('DELETE', `/agents/${agentId}`)).status).toBe(204);
      expect((await call('GET', `/agents/${agentId}`)).status).toBe(404);
      for (const id of [a, b]) {
        expect((await call('GET', `/sessions/${id}`)).status).toBe(404);
        expect(await pending(id)).toEqual([]);
        expect(await keysOf(id)).toEqual([]);
      }
      expect((await call('GET', `/sessions/${unrelated}`)).status).toBe(200);
      // An agent with no sessions is deleted at once.
      const lone = (await call('POST', '/agents', {})).body.agentId;
      expect((await call('DELETE', `/agents/${lone}`)).status).toBe(204);
      expect((await call('GET', `/agents/${lone}`)).status).toBe(404);
    });
  });
}

describe('data lifecycle in the engine', () => {
  it("erasing a session drops its stream's replay (it holds message text)", async () => {
    const engine = createEngine();
    const { sessionId } = await engine.createSession('tenant-a', {});
    await engine.appendMessage('tenant-a', sessionId, { role: 'user', content: 'my account number is 42' });
    expect(engine.recentChunks(sessionId).length).toBeGreaterThan(0);
    await engine.deleteSession('tenant-b', sessionId); // another tenant's: untouched
    expect(engine.recentChunks(sessionId).length).toBeGreaterThan(0);
    await engine.deleteSession('tenant-a', sessionId);
    expect(engine.recentChunks(sessionId)).toEqual([]);
  });
});
