/**
 * Authentication and tenancy. The seed leaves authorization to the app
 * ("authentication is ours to add", R12); ctxflow adds API keys per tenant,
 * and another tenant's session is as absent as an unknown one (R14).
 */
import { describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../support/harness.ts';
import { expectError, notice, state } from './support.ts';

const KEYS = new Map([
  ['key-a', 'tenant-a'],
  ['key-b', 'tenant-b'],
]);
const A = { authorization: 'Bearer key-a' };
const B = { authorization: 'Bearer key-b' };

async function tenantA(h: Harness) {
  const agent = await h.call('POST', '/agents', { tools: [{ name: 'search' }] }, A);
  expect(agent.status).toBe(201);
  const session = await h.call('POST', '/sessions', { agentId: agent.body.agentId }, A);
  expect(session.status).toBe(201);
  const sessionId: string = session.body.sessionId;
  expect((await h.call('POST', '/context', { sessionId, items: [notice('queued for a')] }, A)).status).toBe(200);
  expect((await h.call('POST', `/sessions/${sessionId}/steps`, {}, A)).status).toBe(200);
  const stepId: string = (await h.call('POST', `/sessions/${sessionId}/steps`, {}, A)).body.stepId;
  expect((await h.call('POST', `/sessions/${sessionId}/tool-calls`, { callId: 'c1', name: 'search' }, A)).status).toBe(
    200,
  );
  expect((await h.call('POST', '/context', { sessionId, items: [notice('still queued')] }, A)).status).toBe(200);
  return { agentId: agent.body.agentId as string, sessionId, stepId };
}

/** Every session-scoped route, with a body that would write if it were allowed. */
function sessionRoutes(sessionId: string, stepId: string): [string, string, unknown?][] {
  return [
    ['GET', `/sessions/${sessionId}`],
    ['GET', `/sessions/${sessionId}/inspect`],
    ['GET', `/sessions/${sessionId}/messages`],
    ['GET', `/sessions/${sessionId}/stream?follow=false`],
    ['PATCH', `/sessions/${sessionId}`, { context: 'hijacked', forceRefresh: true }],
    ['POST', '/context', { sessionId, items: [notice('from b')] }],
    ['POST', '/context', { sessionId, items: [notice('from b')], key: 'k' }],
    ['POST', `/sessions/${sessionId}/steps`, {}],
    ['POST', `/sessions/${sessionId}/messages`, { role: 'user', content: 'from b' }],
    ['POST', `/sessions/${sessionId}/tool-calls`, { callId: 'c2', name: 'search' }],
    ['POST', `/sessions/${sessionId}/tool-calls/c1/context`, { items: [notice('from b')] }],
    ['POST', `/sessions/${sessionId}/tool-calls/c1/approval`, { approved: true }],
    ['POST', `/sessions/${sessionId}/tool-calls/c1/answer`, { content: 'from b' }],
    ['POST', `/sessions/${sessionId}/rewind`, { toStepId: stepId }],
    ['POST', `/sessions/${sessionId}/branches`, {}],
    ['POST', `/sessions/${sessionId}/runs/restart`, {}],
  ];
}

describe('authentication and tenancy', () => {
  it('R12: with API keys, a missing, malformed or wrong key is 401 unauthorized on every route and writes nothing', async () => {
    const h = await createHarness({ apiKeys: KEYS });
    const { agentId, sessionId, stepId } = await tenantA(h);
    const before = await state(h, sessionId);
    const routes: [string, string, unknown?][] = [
      ['POST', '/agents', {}],
      ['GET', `/agents/${agentId}`],
      ['PATCH', `/agents/${agentId}`, { context: 'x' }],
      ['POST', `/agents/${agentId}/memories`, { content: 'x' }],
      ['POST', '/sessions', {}],
      ['GET', '/sessions'],
      ...sessionRoutes(sessionId, stepId),
    ];
    for (const headers of [
      {},
      { authorization: 'Bearer wrong' },
      { authorization: 'Basic key-a' },
      { authorization: 'key-a' },
      { authorization: 'Bearer key-a-longer' },
    ]) {
      for (const [method, url, body] of routes) {
        const response = await h.app.inject({
          method: method as 'GET',
          url,
          headers,
          ...(body === undefined ? {} : { payload: body as object }),
        });
        expectError({ status: response.statusCode, body: JSON.parse(response.body) }, 401, 'unauthorized');
      }
    }
    expect(await state(h, sessionId)).toEqual(before);
    expect((await h.call('GET', '/sessions', undefined, A)).body.sessions).toHaveLength(1);
  });

  it('R12: /healthz, /readyz and /metrics need no key', async () => {
    const h = await createHarness({ apiKeys: KEYS });
    for (const url of ['/healthz', '/readyz', '/metrics']) {
      const response = await h.app.inject({ method: 'GET', url });
      expect(response.statusCode, url).toBe(200);
    }
    expect((await h.app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
  });

  it("R14: another tenant's session is 404 state_session_not_found on every route, and nothing is written", async () => {
    const h = await createHarness({ apiKeys: KEYS });
    const { sessionId, stepId } = await tenantA(h);
    const before = await state(h, sessionId);
    for (const [method, url, body] of sessionRoutes(sessionId, stepId)) {
      const answer = await h.call(method, url, body, B);
      expectError(answer, 404, 'state_session_not_found');
    }
    expect(await state(h, sessionId)).toEqual(before);
    expect((await h.call('GET', '/sessions', undefined, A)).body.sessions).toHaveLength(1);
    expect((await h.call('GET', '/sessions', undefined, B)).body.sessions).toEqual([]);
  });

  it("R14: another tenant's agent is 404 state_agent_not_found, and cannot be used or changed", async () => {
    const h = await createHarness({ apiKeys: KEYS });
    const { agentId, sessionId } = await tenantA(h);
    const agentBefore = (await h.call('GET', `/agents/${agentId}`, undefined, A)).body;
    expectError(await h.call('GET', `/agents/${agentId}`, undefined, B), 404, 'state_agent_not_found');
    expectError(await h.call('PATCH', `/agents/${agentId}`, { context: 'hijacked' }, B), 404, 'state_agent_not_found');
    expectError(
      await h.call('POST', `/agents/${agentId}/memories`, { content: 'planted' }, B),
      404,
      'state_agent_not_found',
    );
    expectError(await h.call('POST', '/sessions', { agentId }, B), 404, 'state_agent_not_found');
    expect((await h.call('GET', `/agents/${agentId}`, undefined, A)).body).toEqual(agentBefore);
    expect((await h.call('GET', '/sessions', undefined, B)).body.sessions).toEqual([]);
    expect((await h.call('GET', `/sessions/${sessionId}`, undefined, A)).status).toBe(200);
  });

  it('R14: each tenant works on its own sessions with its own key', async () => {
    const h = await createHarness({ apiKeys: KEYS });
    await tenantA(h);
    const session = await h.call('POST', '/sessions', {}, B);
    expect(session.status).toBe(201);
    const added = await h.call('POST', '/context', { sessionId: session.body.sessionId, items: [notice('b')] }, B);
    expect(added).toEqual({ status: 200, body: { recorded: 1 } });
    expectError(
      await h.call('GET', `/sessions/${session.body.sessionId}`, undefined, A),
      404,
      'state_session_not_found',
    );
    expect(
      (await h.call('GET', '/sessions', undefined, B)).body.sessions.map((x: { sessionId: string }) => x.sessionId),
    ).toEqual([session.body.sessionId]);
  });
});
