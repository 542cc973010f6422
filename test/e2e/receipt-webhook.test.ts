/**
 * The receipt webhook against a real HTTP receiver (node:http) that checks every call
 * with the `standardwebhooks` package's own Webhook.verify, on a real Redis queue.
 * What is guaranteed: every receipt is called at least once until a 2xx, each call
 * with the same `webhook-id` (the receipt id), so a receiver that keeps the first call
 * per id sees each (update, session) once; a stop or a crash mid-call may repeat a call.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DeliveryReceipt } from '@ctxflow/feeds';
import { Secret } from '@ctxflow/service-kit';
import {
  RECEIPT_EVENT_TYPE,
  type ReceiptOutcome,
  type ReceiptQueue,
  type ReceiptSender,
  type ReceiptWebhookConfig,
  RedisReceiptQueue,
  receiptId,
  retryAfterMs,
  startReceiptSender,
} from '@ctxflow/session-runner';
import { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { receipt } from '../contract/receipt-queue.contract.ts';
import { requireRedis } from '../support/services.ts';

// The specification's example secret (standardwebhooks.com).
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

interface Call {
  id: string;
  body: unknown;
  headers: Record<string, string>;
}

/** A receiver: verifies each call with Webhook.verify, records it, answers as `answer` says. */
async function startReceiver(answer: (call: Call, res: ServerResponse) => void) {
  const verifier = new Webhook(SECRET);
  const calls: Call[] = [];
  const unverified: string[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
      let body: unknown;
      try {
        body = verifier.verify(Buffer.concat(chunks).toString('utf8'), headers);
      } catch (err) {
        unverified.push((err as Error).message);
        res.writeHead(401).end();
        return;
      }
      const call = { id: headers['webhook-id']!, body, headers };
      calls.push(call);
      for (const w of waiters.splice(0)) {
        if (calls.length >= w.n) w.resolve();
        else waiters.push(w);
      }
      answer(call, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/receipts`;
  return {
    url,
    calls,
    unverified,
    /** Resolves once `n` verified calls arrived. */
    callsReached: (n: number) =>
      new Promise<void>((resolve) => {
        if (calls.length >= n) resolve();
        else waiters.push({ n, resolve });
      }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Outcomes as the sender's telemetry reports them, with a wait for a count. */
function outcomes() {
  const seen: ReceiptOutcome[] = [];
  const waiters: { outcome: ReceiptOutcome; n: number; resolve: () => void }[] = [];
  const count = (o: ReceiptOutcome) => seen.filter((s) => s === o).length;
  return {
    seen,
    telemetry: {
      called(outcome: ReceiptOutcome) {
        seen.push(outcome);
        for (const w of waiters.splice(0)) {
          if (count(w.outcome) >= w.n) w.resolve();
          else waiters.push(w);
        }
      },
    },
    reached: (outcome: ReceiptOutcome, n: number) =>
      new Promise<void>((resolve) => {
        if (count(outcome) >= n) resolve();
        else waiters.push({ outcome, n, resolve });
      }),
  };
}

let redis: Redis | undefined;
const prefixes: string[] = [];
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});
afterAll(async () => {
  for (const prefix of prefixes) {
    for (const name of ['due', 'receipts', 'states', 'dead', 'sent']) await redis?.del(`${prefix}:{receipts}:${name}`);
  }
  await redis?.quit();
});

function redisQueue(prefix = `ctxtest-${randomUUID().slice(0, 12)}`): { queue: ReceiptQueue; prefix: string } {
  redis ??= new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
  prefixes.push(prefix);
  return { queue: new RedisReceiptQueue(redis, { prefix }), prefix };
}

function webhookOf(url: string, overrides: Partial<ReceiptWebhookConfig> = {}): ReceiptWebhookConfig {
  return { url, secret: new Secret(SECRET), maxAttempts: 5, timeoutMs: 5_000, ...overrides };
}

function sender(queue: ReceiptQueue, webhook: ReceiptWebhookConfig, telemetry?: ReturnType<typeof outcomes>) {
  const started: ReceiptSender = startReceiptSender({
    queue,
    webhook,
    backoffMs: 20,
    maxBackoffMs: 200,
    pollMs: 50,
    ...(telemetry ? { telemetry: telemetry.telemetry } : {}),
  });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await started.close();
  };
  closers.push(close);
  return { close };
}

function expectedBody(r: DeliveryReceipt) {
  return { type: RECEIPT_EVENT_TYPE, timestamp: r.at, data: r };
}

describe('the receipt webhook', () => {
  it('calls once per receipt, signed (Webhook.verify), webhook-id the receipt id, the receipt as data', async () => {
    const receiver = await startReceiver((_, res) => res.writeHead(204).end());
    closers.push(receiver.close);
    const { queue } = redisQueue();
    const seen = outcomes();
    const receipts = [receipt(), receipt({ tenant: 'globex', source: 'generic' }), receipt()];
    const { requestId: _, ...withoutRequest } = receipt();
    receipts.push(withoutRequest);
    await queue.enqueue(receipts);
    await queue.enqueue(receipts); // a relay cut short hands them again
    sender(queue, webhookOf(receiver.url), seen);
    await seen.reached('sent', receipts.length);
    expect(receiver.unverified).toEqual([]);
    const byId = new Map(receiver.calls.map((c) => [c.id, c]));
    expect(receiver.calls).toHaveLength(receipts.length);
    for (const r of receipts) {
      const call = byId.get(receiptId(r))!;
      expect(call.body).toEqual(expectedBody(r));
      expect(call.headers['content-type']).toBe('application/json');
      expect(call.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    }
    await queue.enqueue(receipts); // sent: remembered, not added again
    expect(await queue.take(10, 1_000)).toEqual([]);
    expect(await queue.deadLetters()).toEqual([]);
  });

  it('across a stop mid-call and a new sender on the same Redis queue, every receipt arrives, same ids', async () => {
    let held: ServerResponse | undefined;
    const receiver = await startReceiver((_, res) => {
      // The first call is left unanswered: the sender stops while it is in flight.
      if (receiver.calls.length === 1) held = res;
      else res.writeHead(200).end('ok');
    });
    closers.push(receiver.close);
    const { queue, prefix } = redisQueue();
    const first = receipt();
    await queue.enqueue([first]);
    const before = sender(queue, webhookOf(receiver.url));
    await receiver.callsReached(1);
    await before.close(); // cuts the call short: the receipt is put back, due at once
    held?.destroy();

    // A new runner: a new queue object on the same keys, more receipts meanwhile.
    const { queue: again } = redisQueue(prefix);
    const more = [receipt(), receipt()];
    await again.enqueue(more);
    const seen = outcomes();
    sender(again, webhookOf(receiver.url), seen);
    await seen.reached('sent', 3);
    const ids = receiver.calls.map((c) => c.id);
    // At least once with a stable id: the cut call arrives again under the same webhook-id.
    expect(ids.filter((id) => id === receiptId(first))).toHaveLength(2);
    expect(new Set(ids)).toEqual(new Set([first, ...more].map(receiptId)));
    expect(ids).toHaveLength(4);
    expect(await again.take(10, 1_000)).toEqual([]);
  });

  it('a runner that died holding receipts leaves them to the next once its lease runs out', async () => {
    const receiver = await startReceiver((_, res) => res.writeHead(202).end());
    closers.push(receiver.close);
    const { queue } = redisQueue();
    const receipts = [receipt(), receipt()];
    await queue.enqueue(receipts);
    // The dead runner's take: leased, never settled.
    expect(await queue.take(10, 500)).toHaveLength(2);
    const seen = outcomes();
    sender(queue, webhookOf(receiver.url), seen);
    await seen.reached('sent', 2);
    expect(receiver.calls.map((c) => c.id).sort()).toEqual(receipts.map(receiptId).sort());
  });

  it('429 and 5xx are retried (Retry-After honoured), the same webhook-id each time, until a 2xx', async () => {
    const receiver = await startReceiver((_, res) => {
      const n = receiver.calls.length;
      if (n === 1) res.writeHead(429, { 'retry-after': '0' }).end();
      else if (n === 2) res.writeHead(503).end();
      else res.writeHead(200).end();
    });
    closers.push(receiver.close);
    const { queue } = redisQueue();
    const one = receipt();
    await queue.enqueue([one]);
    const seen = outcomes();
    sender(queue, webhookOf(receiver.url), seen);
    await seen.reached('sent', 1);
    expect(seen.seen).toEqual(['retried', 'retried', 'sent']);
    expect(receiver.calls.map((c) => c.id)).toEqual([receiptId(one), receiptId(one), receiptId(one)]);
    expect(receiver.calls.map((c) => c.body)).toEqual([expectedBody(one), expectedBody(one), expectedBody(one)]);
  });

  it('a receiver that always fails ends on the dead-letter path after the attempts; replay sends it', async () => {
    let healthy = false;
    const receiver = await startReceiver((_, res) => res.writeHead(healthy ? 204 : 500).end());
    closers.push(receiver.close);
    const { queue } = redisQueue();
    const one = receipt();
    await queue.enqueue([one]);
    const seen = outcomes();
    sender(queue, webhookOf(receiver.url, { maxAttempts: 3 }), seen);
    await seen.reached('dead_lettered', 1);
    expect(seen.seen).toEqual(['retried', 'retried', 'dead_lettered']);
    expect(receiver.calls).toHaveLength(3);
    const dead = await queue.deadLetters();
    expect(dead.map(({ at: _, ...d }) => d)).toEqual([
      { id: receiptId(one), receipt: one, attempts: 3, error: 'http 500' },
    ]);

    healthy = true;
    expect((await queue.replay()).map((d) => d.id)).toEqual([receiptId(one)]);
    await seen.reached('sent', 1);
    expect(receiver.calls.map((c) => c.id)).toEqual(Array(4).fill(receiptId(one)));
    expect(await queue.deadLetters()).toEqual([]);
  });

  it('a 4xx other than 408, 425, 429 is a refusal: dead-lettered at once', async () => {
    const receiver = await startReceiver((_, res) => res.writeHead(410).end());
    closers.push(receiver.close);
    const { queue } = redisQueue();
    const one = receipt();
    await queue.enqueue([one]);
    const seen = outcomes();
    sender(queue, webhookOf(receiver.url), seen);
    await seen.reached('dead_lettered', 1);
    expect(seen.seen).toEqual(['dead_lettered']);
    expect((await queue.deadLetters()).map((d) => [d.id, d.attempts, d.error])).toEqual([
      [receiptId(one), 1, 'http 410'],
    ]);
  });

  it('a connection refused and a timeout are retried, and named in the dead letter', async () => {
    const closed = await startReceiver(() => {});
    const refusedUrl = closed.url;
    await closed.close();
    const { queue } = redisQueue();
    const one = receipt();
    await queue.enqueue([one]);
    const seen = outcomes();
    const first = sender(queue, webhookOf(refusedUrl, { maxAttempts: 2 }), seen);
    await seen.reached('dead_lettered', 1);
    await first.close();
    expect((await queue.deadLetters()).map((d) => d.error)).toEqual(['connection: ECONNREFUSED']);

    const silent = await startReceiver(() => {}); // takes the call, never answers
    closers.push(silent.close);
    await queue.replay();
    const slow = outcomes();
    sender(queue, webhookOf(silent.url, { maxAttempts: 1, timeoutMs: 200 }), slow);
    await slow.reached('dead_lettered', 1);
    expect((await queue.deadLetters()).map((d) => d.error)).toEqual(['timeout after 200 ms']);
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterMs('7', now)).toBe(7_000);
    expect(retryAfterMs('Thu, 01 Jan 2026 00:00:30 GMT', now)).toBe(30_000);
    expect(retryAfterMs('Wed, 31 Dec 2025 00:00:00 GMT', now)).toBe(0);
    expect(retryAfterMs(null, now)).toBeUndefined();
    expect(retryAfterMs('soon', now)).toBeUndefined();
  });
});
