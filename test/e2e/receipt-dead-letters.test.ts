/**
 * The receipt webhook's dead-letter path for operators: a receiver that always fails
 * leaves the receipt on the dead-letter path (nothing lost), `npm run dlq -- list --topic
 * receipts` shows it, `replay` sends it again (same webhook-id) once the receiver is fixed,
 * and a second replay moves nothing. The tool runs as a process on the real Redis.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { Secret } from '@ctxflow/service-kit';
import { type ReceiptOutcome, RedisReceiptQueue, receiptId, startReceiptSender } from '@ctxflow/session-runner';
import { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, describe, expect, it } from 'vitest';
import { receipt } from '../contract/receipt-queue.contract.ts';
import { requireRedis } from '../support/services.ts';

const run = promisify(execFile);
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const prefix = `ctxtest-${randomUUID().slice(0, 12)}`;
let redis: Redis | undefined;
afterAll(async () => {
  for (const name of ['due', 'receipts', 'states', 'dead', 'sent']) await redis?.del(`${prefix}:{receipts}:${name}`);
  await redis?.quit();
});

function dlq(...args: string[]) {
  return run(process.execPath, ['scripts/dlq.ts', ...args], {
    env: { PATH: process.env.PATH ?? '', REDIS_URL: requireRedis(), CTXFLOW_REDIS_PREFIX: prefix, USER: 'oncall' },
  });
}

describe('receipt dead letters', () => {
  it('a failing receiver ends on the dead-letter path; npm run dlq lists and replays it', async () => {
    redis = new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
    const verifier = new Webhook(SECRET);
    let healthy = false;
    const ids: string[] = [];
    const server: Server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
        verifier.verify(Buffer.concat(chunks).toString('utf8'), headers);
        ids.push(headers['webhook-id']!);
        res.writeHead(healthy ? 204 : 503).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;

    const queue = new RedisReceiptQueue(redis, { prefix });
    const one = receipt({ tenant: 'acme' });
    const other = receipt({ tenant: 'globex' });
    await queue.enqueue([one, other]);
    const waiters: { outcome: ReceiptOutcome; n: number; resolve: () => void }[] = [];
    const seen: ReceiptOutcome[] = [];
    const reached = (outcome: ReceiptOutcome, n: number) =>
      new Promise<void>((resolve) => {
        if (seen.filter((s) => s === outcome).length >= n) resolve();
        else waiters.push({ outcome, n, resolve });
      });
    const sender = startReceiptSender({
      queue,
      webhook: { url, secret: new Secret(SECRET), maxAttempts: 2, timeoutMs: 5_000 },
      backoffMs: 10,
      maxBackoffMs: 50,
      pollMs: 50,
      telemetry: {
        called(outcome) {
          seen.push(outcome);
          for (const w of waiters.splice(0)) {
            if (seen.filter((s) => s === w.outcome).length >= w.n) w.resolve();
            else waiters.push(w);
          }
        },
      },
    });
    try {
      await reached('dead_lettered', 2);
      const listed = await dlq('list', '--topic', 'receipts');
      expect(listed.stdout).toContain(`${receiptId(one)}  tenant="acme"  delivery=zendesk/${one.eventId}`);
      expect(listed.stdout).toContain('attempts=2  error="http 503"');
      expect(listed.stdout).toContain('2 dead-lettered receipt(s)');

      healthy = true;
      const replayed = await dlq('replay', '--topic', 'receipts', '--tenant', 'acme');
      expect(replayed.stdout).toContain(`replayed ${receiptId(one)}`);
      expect(replayed.stdout).toContain('1 receipt(s) replayed');
      const audit = replayed.stderr
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(audit).toMatchObject([
        {
          tenant: 'acme',
          subject: 'operator:oncall',
          action: 'receipts.replay',
          target: receiptId(one),
          outcome: 'ok',
        },
      ]);
      await reached('sent', 1);
      expect(ids.filter((id) => id === receiptId(one))).toHaveLength(3);
      expect((await dlq('replay', '--topic', 'receipts', '--id', receiptId(one))).stdout).toContain(
        '0 receipt(s) replayed',
      );
      expect((await queue.deadLetters()).map((d) => d.id)).toEqual([receiptId(other)]);
    } finally {
      await sender.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    // Three runs of the tool, each a Node process loading the runner's modules.
  }, 120_000);

  it('without Redis the tool exits 2 naming REDIS_URL', async () => {
    const failed = await run(process.execPath, ['scripts/dlq.ts', 'list', '--topic', 'receipts'], {
      env: { PATH: process.env.PATH ?? '' },
    }).catch((err: { code: number; stderr: string }) => err);
    expect('code' in failed ? failed.code : 0).toBe(2);
    expect(failed.stderr).toContain('REDIS_URL');
  }, 60_000);
});
