/**
 * The embedded app's receipt webhook: with CTXFLOW_RECEIPT_URL its sink is an in-process
 * queue whose sender calls the webhook (checked with standardwebhooks' Webhook.verify);
 * without it the sink drops receipts and nothing is called.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildEmbeddedApp } from '@ctxflow/embedded';
import { Secret } from '@ctxflow/service-kit';
import { noReceiptSink, RECEIPT_EVENT_TYPE, receiptId } from '@ctxflow/session-runner';
import { Webhook } from 'standardwebhooks';
import { expect, it } from 'vitest';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

it('embedded: receipts handed to the sink reach the webhook, signed', async () => {
  const verifier = new Webhook(SECRET);
  const received: { id: string; body: unknown }[] = [];
  let arrived: () => void = () => {};
  const arrival = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
      received.push({ id: headers['webhook-id']!, body: verifier.verify(Buffer.concat(chunks).toString(), headers) });
      res.writeHead(204).end();
      arrived();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const embedded = await buildEmbeddedApp({
    config: {
      apiKeys: new Map(),
      secrets: {},
      receiptWebhook: { url, secret: new Secret(SECRET), maxAttempts: 3, timeoutMs: 5_000 },
    },
  });
  const receipt = {
    tenant: 'default',
    source: 'generic',
    eventId: 'evt_1',
    sessionId: 'ses_1',
    stepId: 'stp_1',
    rowId: 'row_1',
    at: '2026-01-01T00:00:00.000Z',
  };
  try {
    await embedded.receipts.sink.enqueue([receipt]);
    await arrival;
    expect(received).toEqual([
      { id: receiptId(receipt), body: { type: RECEIPT_EVENT_TYPE, timestamp: receipt.at, data: receipt } },
    ]);
  } finally {
    await embedded.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

it('embedded: without a receipt webhook the sink drops receipts', async () => {
  const embedded = await buildEmbeddedApp({ config: { apiKeys: new Map(), secrets: {} } });
  expect(embedded.receipts.sink).toBe(noReceiptSink);
  expect(embedded.receipts.queue).toBeUndefined();
  await embedded.close();
});
