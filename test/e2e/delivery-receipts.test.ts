/**
 * `GET /deliveries/:source/:eventId` on the embedded default (memory stores, in-process bus):
 * a signed update through the feed to a subscribed session and a step, then its receipt;
 * a delivery never seen; tenants apart; an erased session left out; bad parameters refused.
 */
import { createHmac } from 'node:crypto';
import { TOPICS } from '@ctxflow/contracts';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { afterEach, describe, expect, it } from 'vitest';

const SECRET = 'receipts-secret-a';
const SECRET_B = 'receipts-secret-b';
const KEYS = new Map([
  ['key-a', 'tenant-a'],
  ['key-b', 'tenant-b'],
]);

function signed(body: object, secret = SECRET) {
  const raw = JSON.stringify(body);
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = createHmac('sha256', secret).update(`${ts}.${raw}`).digest('hex');
  return {
    payload: raw,
    headers: { 'content-type': 'application/json', 'x-ctxflow-timestamp': ts, 'x-ctxflow-signature': `sha256=${sig}` },
  };
}

let embedded: EmbeddedApp | undefined;
afterEach(async () => {
  await embedded?.close();
  embedded = undefined;
});

async function setup() {
  const secrets = {
    generic: [
      { tenant: 'tenant-a', secret: SECRET },
      { tenant: 'tenant-b', secret: SECRET_B },
    ],
  };
  embedded = await buildEmbeddedApp({ config: { apiKeys: KEYS, secrets } });
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
  /** Posts a signed update and waits until step-context applied it. */
  const post = async (update: object, secret = SECRET) => {
    const res = await app.inject({ method: 'POST', url: '/feeds/generic', ...signed(update, secret) });
    expect(res.statusCode).toBe(202);
    published++;
    for (let i = 0; i < 400; i++) {
      const at = await embedded!.feedStreams.resumeFrom(TOPICS.ticketUpdates, 0);
      if (at !== undefined && BigInt(at) >= BigInt(published)) return;
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error('update was not applied');
  };
  /** The receipt, once it names `sessions` sessions (the relay records it after the commit). */
  const receipt = async (eventId: string, sessions: number, key = 'key-a') => {
    for (let i = 0; i < 400; i++) {
      const res = await call('GET', `/deliveries/generic/${encodeURIComponent(eventId)}`, undefined, key);
      if (res.status !== 200 || res.body.sessions.length >= sessions) return res;
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error(`no receipt with ${sessions} sessions`);
  };
  return { app, call, post, receipt };
}

describe('GET /deliveries/:source/:eventId on the embedded app', () => {
  it('a delivery that reached a session and a step: accepted, published, the session, step, row and request id', async () => {
    const { call, post, receipt } = await setup();
    const session = (await call('POST', '/sessions', {})).body.sessionId;
    expect(
      (await call('POST', `/sessions/${session}/subscriptions`, { source: 'generic', ticket: 'T-7' })).status,
    ).toBe(201);
    await post({ eventId: 'evt-7', ticket: 'T-7', summary: 'Customer replied' });
    // Published, not yet carried by any step.
    expect((await call('GET', '/deliveries/generic/evt-7')).body).toEqual({
      source: 'generic',
      eventId: 'evt-7',
      accepted: true,
      published: true,
      sessions: [],
    });
    const step = await call('POST', `/sessions/${session}/steps`, { requestId: 'req-7' });
    expect(step.status).toBe(200);
    expect(step.body.rows).toHaveLength(1);
    const answer = await receipt('evt-7', 1);
    expect(answer).toEqual({
      status: 200,
      body: {
        source: 'generic',
        eventId: 'evt-7',
        accepted: true,
        published: true,
        sessions: [
          {
            sessionId: session,
            stepId: step.body.stepId,
            rowId: step.body.rows[0].id,
            requestId: 'req-7',
            at: answer.body.sessions[0].at,
          },
        ],
      },
    });
    expect(Number.isNaN(Date.parse(answer.body.sessions[0].at))).toBe(false);
  });

  it('a delivery never seen: 200, not accepted, no sessions', async () => {
    const { call } = await setup();
    expect(await call('GET', '/deliveries/zendesk/never-sent')).toEqual({
      status: 200,
      body: { source: 'zendesk', eventId: 'never-sent', accepted: false, published: false, sessions: [] },
    });
  });

  it("another tenant's delivery of the same id is not this tenant's: nothing shown", async () => {
    const { call, post, receipt } = await setup();
    const session = (await call('POST', '/sessions', {}, 'key-b')).body.sessionId;
    await call('POST', `/sessions/${session}/subscriptions`, { source: 'generic', ticket: 'T-9' }, 'key-b');
    await post({ eventId: 'evt-9', ticket: 'T-9', summary: 'B only' }, SECRET_B);
    await call('POST', `/sessions/${session}/steps`, {}, 'key-b');
    expect((await receipt('evt-9', 1, 'key-b')).body.sessions.map((s: { sessionId: string }) => s.sessionId)).toEqual([
      session,
    ]);
    expect((await call('GET', '/deliveries/generic/evt-9')).body).toEqual({
      source: 'generic',
      eventId: 'evt-9',
      accepted: false,
      published: false,
      sessions: [],
    });
  });

  it('an erased session is left out of the receipt; the delivery stays published', async () => {
    const { call, post, receipt } = await setup();
    const kept = (await call('POST', '/sessions', {})).body.sessionId;
    const erased = (await call('POST', '/sessions', {})).body.sessionId;
    for (const id of [kept, erased]) {
      await call('POST', `/sessions/${id}/subscriptions`, { source: 'generic', ticket: 'T-3' });
    }
    await post({ eventId: 'evt-3', ticket: 'T-3', summary: 'Two sessions' });
    await call('POST', `/sessions/${kept}/steps`, {});
    await call('POST', `/sessions/${erased}/steps`, {});
    expect((await receipt('evt-3', 2)).body.sessions).toHaveLength(2);
    expect((await call('DELETE', `/sessions/${erased}`)).status).toBe(204);
    const after = (await call('GET', '/deliveries/generic/evt-3')).body;
    expect(after.sessions.map((s: { sessionId: string }) => s.sessionId)).toEqual([kept]);
    expect(after).toMatchObject({ accepted: true, published: true });
  });

  it('a bad source or an over-long event id is 400 validation_error; no credentials is 401', async () => {
    const { app, call } = await setup();
    for (const url of ['/deliveries/Not_A_Source/evt-1', `/deliveries/generic/${'e'.repeat(257)}`]) {
      const res = await call('GET', url);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('validation_error');
    }
    expect((await call('GET', `/deliveries/generic/${'e'.repeat(256)}`)).status).toBe(200);
    const anonymous = await app.inject({ method: 'GET', url: '/deliveries/generic/evt-1' });
    expect(anonymous.statusCode).toBe(401);
  });

  it('the OpenAPI document declares the route with the read scope and its answers', async () => {
    const { app } = await setup();
    const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const operation = doc.paths['/deliveries/{source}/{eventId}'].get;
    expect(operation.operationId).toBe('getDelivery');
    expect(operation.security).toEqual([{ bearer: ['ctxflow:read'] }]);
    expect(Object.keys(operation.responses).sort()).toEqual(expect.arrayContaining(['200', '400', '401', '403']));
  });
});
