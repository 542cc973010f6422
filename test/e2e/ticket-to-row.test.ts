import { createHmac } from 'node:crypto';
import { TOPICS } from '@ctxflow/contracts';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { afterEach, describe, expect, it } from 'vitest';

const SECRET = 'e2e-secret';
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
  embedded = await buildEmbeddedApp({ config: { apiKeys: KEYS, secrets: { generic: SECRET } } });
  const app = embedded.app;
  const as = (key: string) => ({ authorization: `Bearer ${key}` });
  const call = async (method: 'GET' | 'POST', url: string, body?: object, key = 'key-a') => {
    const res = await app.inject({ method, url, headers: as(key), ...(body ? { payload: body } : {}) });
    return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
  };
  let published = 0;
  /** Posts a signed update and waits until step-context applied it (the 202 means published). */
  const post = async (update: object) => {
    const res = await app.inject({ method: 'POST', url: '/feeds/generic', ...signed(update) });
    expect(res.statusCode).toBe(202);
    const duplicate = JSON.parse(res.body).duplicate === true;
    if (!duplicate) published++;
    const target = String(published - 1);
    for (let i = 0; i < 200; i++) {
      const at = await embedded!.batches.resumeFrom(TOPICS.ticketUpdates, 0);
      if (published === 0 || (at !== undefined && BigInt(at) > BigInt(target))) return res;
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error('update was not applied');
  };
  return { app, call, post };
}

describe('ticket update to context row, through the HTTP API', () => {
  it('a signed update reaches a subscribed session exactly once, as one hook notice with a cursor', async () => {
    const { call, post } = await setup();
    const session = (await call('POST', '/sessions', {})).body.sessionId;
    const other = (await call('POST', '/sessions', {})).body.sessionId; // not subscribed
    const foreign = (await call('POST', '/sessions', {}, 'key-b')).body.sessionId; // another tenant
    expect(
      (await call('POST', `/sessions/${session}/subscriptions`, { source: 'generic', ticket: 'T-42' })).status,
    ).toBe(201);
    // another tenant cannot subscribe to the session, nor see it
    expect(
      (await call('POST', `/sessions/${session}/subscriptions`, { source: 'generic', ticket: 'T-42' }, 'key-b')).status,
    ).toBe(404);
    expect(
      (await call('POST', `/sessions/${foreign}/subscriptions`, { source: 'generic', ticket: 'T-42' })).status,
    ).toBe(404);

    const update = { eventId: 'evt-1', ticket: 'T-42', summary: 'Customer replied: still broken', version: 1 };
    await post(update);
    const step1 = (await call('POST', `/sessions/${session}/steps`, {})).body;
    expect(step1.rows).toHaveLength(1);
    expect(step1.rows[0]).toMatchObject({ role: 'context', kind: 'notice', source: 'hook', cursor: step1.cursor });
    expect(step1.rows[0].content).toContain('Customer replied: still broken');
    expect(step1.cursor).not.toBeNull();

    // the next step adds nothing; the same delivery again adds nothing
    expect((await call('POST', `/sessions/${session}/steps`, {})).body.rows).toEqual([]);
    await post(update);
    expect((await call('POST', `/sessions/${session}/steps`, {})).body.rows).toEqual([]);

    // two updates between steps: one coalesced notice
    await post({ eventId: 'evt-2', ticket: 'T-42', summary: 'Status: pending', version: 2 });
    await post({ eventId: 'evt-3', ticket: 'T-42', summary: 'Priority raised to P1', version: 3 });
    const coalesced = (await call('POST', `/sessions/${session}/steps`, {})).body;
    expect(coalesced.rows).toHaveLength(1);
    expect(coalesced.rows[0].content).toContain('Status: pending');
    expect(coalesced.rows[0].content).toContain('Priority raised to P1');

    // an older version after a newer one adds nothing
    await post({ eventId: 'evt-0', ticket: 'T-42', summary: 'Stale news', version: 1 });
    expect((await call('POST', `/sessions/${session}/steps`, {})).body.rows).toEqual([]);

    // neither the unsubscribed session nor the other tenant's session got anything
    expect((await call('POST', `/sessions/${other}/steps`, {})).body.rows).toEqual([]);
    expect((await call('POST', `/sessions/${foreign}/steps`, {}, 'key-b')).body.rows).toEqual([]);
  });

  it('a bad signature is 401 and reaches no session', async () => {
    const { app, call } = await setup();
    const session = (await call('POST', '/sessions', {})).body.sessionId;
    await call('POST', `/sessions/${session}/subscriptions`, { source: 'generic', ticket: 'T-1' });
    const forged = signed({ eventId: 'evt-x', ticket: 'T-1', summary: 'forged' }, 'wrong-secret');
    const res = await app.inject({ method: 'POST', url: '/feeds/generic', ...forged });
    expect(res.statusCode).toBe(401);
    expect(JSON.parse(res.body).error.code).toBe('unauthorized');
    await new Promise((r) => setTimeout(r, 20));
    expect((await call('POST', `/sessions/${session}/steps`, {})).body.rows).toEqual([]);
  });
});
