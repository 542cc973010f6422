/**
 * The receipt webhook end to end on the embedded default: a signed ticket update through the
 * feed to a subscribed session, a step that carries it, and the receiver (node:http, every call
 * checked with standardwebhooks' Webhook.verify) is called once for that (update, session),
 * with the step, row and request id the receipt route shows; a later step that carries nothing
 * new calls nothing.
 */
import { createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TOPICS } from '@ctxflow/contracts';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { Secret } from '@ctxflow/service-kit';
import { RECEIPT_EVENT_TYPE, receiptId } from '@ctxflow/session-runner';
import { Webhook } from 'standardwebhooks';
import { afterAll, expect, it } from 'vitest';

const FEED_SECRET = 'receipt-webhook-feed-secret';
const WEBHOOK_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const KEYS = new Map([['key-a', 'tenant-a']]);

const verifier = new Webhook(WEBHOOK_SECRET);
const calls: { id: string; body: { type: string; data: Record<string, unknown> } }[] = [];
const waiters: { n: number; resolve: () => void }[] = [];
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
    const body = verifier.verify(Buffer.concat(chunks).toString('utf8'), headers) as (typeof calls)[number]['body'];
    calls.push({ id: headers['webhook-id']!, body });
    for (const w of waiters.splice(0)) {
      if (calls.length >= w.n) w.resolve();
      else waiters.push(w);
    }
    res.writeHead(204).end();
  });
});
const callsReached = (n: number) =>
  new Promise<void>((resolve) => {
    if (calls.length >= n) resolve();
    else waiters.push({ n, resolve });
  });

let embedded: EmbeddedApp | undefined;
afterAll(async () => {
  await embedded?.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function signed(body: object) {
  const raw = JSON.stringify(body);
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = createHmac('sha256', FEED_SECRET).update(`${ts}.${raw}`).digest('hex');
  return {
    payload: raw,
    headers: { 'content-type': 'application/json', 'x-ctxflow-timestamp': ts, 'x-ctxflow-signature': `sha256=${sig}` },
  };
}

it('embedded: an update carried by a step calls the receipt webhook once for that session', async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/receipts`;
  embedded = await buildEmbeddedApp({
    config: {
      apiKeys: KEYS,
      secrets: { generic: [{ tenant: 'tenant-a', secret: FEED_SECRET }] },
      receiptWebhook: { url, secret: new Secret(WEBHOOK_SECRET), maxAttempts: 3, timeoutMs: 5_000 },
    },
  });
  const app = embedded.app;
  const call = async (method: 'GET' | 'POST', path: string, body?: object) => {
    const res = await app.inject({
      method,
      url: path,
      headers: { authorization: 'Bearer key-a' },
      ...(body ? { payload: body } : {}),
    });
    return { status: res.statusCode, body: JSON.parse(res.body) };
  };
  let published = 0;
  const post = async (update: object) => {
    expect((await app.inject({ method: 'POST', url: '/feeds/generic', ...signed(update) })).statusCode).toBe(202);
    published++;
    // Applied once step-context's feed stream holds it (as test/e2e/delivery-receipts.test.ts waits).
    for (let i = 0; i < 400; i++) {
      const at = await embedded!.feedStreams.resumeFrom(TOPICS.ticketUpdates, 0);
      if (at !== undefined && BigInt(at) >= BigInt(published)) return;
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error('update was not applied');
  };

  const session = (await call('POST', '/sessions', {})).body.sessionId as string;
  expect((await call('POST', `/sessions/${session}/subscriptions`, { source: 'generic', ticket: 'T-1' })).status).toBe(
    201,
  );
  await post({ eventId: 'evt-1', ticket: 'T-1', summary: 'Customer replied' });
  const step = await call('POST', `/sessions/${session}/steps`, { requestId: 'req-1' });
  expect(step.status).toBe(200);
  await callsReached(1);
  const route = await call('GET', '/deliveries/generic/evt-1');
  const where = { tenant: 'tenant-a', source: 'generic', eventId: 'evt-1', sessionId: session };
  expect(calls).toEqual([
    {
      id: receiptId(where),
      body: {
        type: RECEIPT_EVENT_TYPE,
        timestamp: route.body.sessions[0].at,
        data: {
          ...where,
          stepId: step.body.stepId,
          rowId: step.body.rows[0].id,
          requestId: 'req-1',
          at: route.body.sessions[0].at,
        },
      },
    },
  ]);

  // A step with nothing new, then a second update and its step: one more call, for evt-2 only.
  expect((await call('POST', `/sessions/${session}/steps`, { requestId: 'req-2' })).status).toBe(200);
  await post({ eventId: 'evt-2', ticket: 'T-1', summary: 'Second reply' });
  expect((await call('POST', `/sessions/${session}/steps`, { requestId: 'req-3' })).status).toBe(200);
  await callsReached(2);
  expect(calls.map((c) => c.body.data.eventId)).toEqual(['evt-1', 'evt-2']);
  expect(calls[1]!.body.data.requestId).toBe('req-3');
});
