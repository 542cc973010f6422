import { createHmac } from 'node:crypto';
import { TOPICS } from '@ctxflow/contracts';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { afterEach, describe, expect, it } from 'vitest';

const SECRET = 'e2e-secret';
const SECRET_B = 'e2e-secret-b';
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
  // With API keys every feed secret names its tenant.
  const secrets = {
    generic: [
      { tenant: 'tenant-a', secret: SECRET },
      { tenant: 'tenant-b', secret: SECRET_B },
    ],
  };
  embedded = await buildEmbeddedApp({ config: { apiKeys: KEYS, secrets } });
  const app = embedded.app;
  const as = (key: string) => ({ authorization: `Bearer ${key}` });
  const call = async (method: 'GET' | 'POST', url: string, body?: object, key = 'key-a') => {
    const res = await app.inject({ method, url, headers: as(key), ...(body ? { payload: body } : {}) });
    return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
  };
  let published = 0;
  /** Posts a signed update and waits until step-context applied it (the 202 means published). */
  const post = async (update: object, secret = SECRET) => {
    const res = await app.inject({ method: 'POST', url: '/feeds/generic', ...signed(update, secret) });
    expect(res.statusCode).toBe(202);
    const duplicate = JSON.parse(res.body).duplicate === true;
    if (!duplicate) published++;
    const target = String(published - 1);
    for (let i = 0; i < 200; i++) {
      const at = await embedded!.feedStreams.resumeFrom(TOPICS.ticketUpdates, 0);
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

  it("tenant B's wildcard subscription never sees tenant A's update, and the reverse", async () => {
    const { call, post } = await setup();
    const ofA = (await call('POST', '/sessions', {})).body.sessionId;
    const ofB = (await call('POST', '/sessions', {}, 'key-b')).body.sessionId;
    expect((await call('POST', `/sessions/${ofA}/subscriptions`, { source: 'generic', ticket: '*' })).status).toBe(201);
    expect(
      (await call('POST', `/sessions/${ofB}/subscriptions`, { source: 'generic', ticket: '*' }, 'key-b')).status,
    ).toBe(201);

    await post({ eventId: 'a-1', ticket: 'ACME-1', summary: 'tenant A confidential: refund approved' });
    const stepB = (await call('POST', `/sessions/${ofB}/steps`, {}, 'key-b')).body;
    expect(stepB.rows).toEqual([]);
    expect(JSON.stringify(stepB)).not.toContain('tenant A confidential');
    const stepA = (await call('POST', `/sessions/${ofA}/steps`, {})).body;
    expect(stepA.rows).toHaveLength(1);
    expect(stepA.rows[0].content).toContain('tenant A confidential: refund approved');

    await post({ eventId: 'b-1', ticket: 'GLOBEX-1', summary: 'tenant B private note' }, SECRET_B);
    expect((await call('POST', `/sessions/${ofA}/steps`, {})).body.rows).toEqual([]);
    const nextB = (await call('POST', `/sessions/${ofB}/steps`, {}, 'key-b')).body;
    expect(nextB.rows).toHaveLength(1);
    expect(nextB.rows[0].content).toContain('tenant B private note');
  });

  it('the same eventId from both tenants delivers to both', async () => {
    const { call, post } = await setup();
    const ofA = (await call('POST', '/sessions', {})).body.sessionId;
    const ofB = (await call('POST', '/sessions', {}, 'key-b')).body.sessionId;
    await call('POST', `/sessions/${ofA}/subscriptions`, { source: 'generic', ticket: 'T-7' });
    await call('POST', `/sessions/${ofB}/subscriptions`, { source: 'generic', ticket: 'T-7' }, 'key-b');
    const a = await post({ eventId: 'evt-shared', ticket: 'T-7', summary: 'from A' });
    const b = await post({ eventId: 'evt-shared', ticket: 'T-7', summary: 'from B' }, SECRET_B);
    expect(JSON.parse(a.body)).toEqual({ accepted: true, id: 'generic:evt-shared' });
    expect(JSON.parse(b.body)).toEqual({ accepted: true, id: 'generic:evt-shared' });
    const rowsA = (await call('POST', `/sessions/${ofA}/steps`, {})).body.rows;
    const rowsB = (await call('POST', `/sessions/${ofB}/steps`, {}, 'key-b')).body.rows;
    expect(rowsA).toHaveLength(1);
    expect(rowsA[0].content).toContain('from A');
    expect(rowsA[0].content).not.toContain('from B');
    expect(rowsB).toHaveLength(1);
    expect(rowsB[0].content).toContain('from B');
    expect(rowsB[0].content).not.toContain('from A');
  });
});
