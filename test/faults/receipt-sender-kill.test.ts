/**
 * Fault: kill -9 of a process sending receipts while its calls are in flight, then a new
 * process on the same Redis queue. Every receipt reaches the receiver (each call checked
 * with standardwebhooks' Webhook.verify); the receipts whose calls the kill cut short are
 * called again, under the same webhook-id, once the dead process's lease ran out; no other
 * receipt is called twice, and the queue ends empty (nothing due, nothing dead-lettered).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RedisReceiptQueue, receiptId } from '@ctxflow/session-runner';
import { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, describe, expect, it } from 'vitest';
import { receipt } from '../contract/receipt-queue.contract.ts';
import { requireRedis } from '../support/services.ts';
import { waitFor } from './processes.ts';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const prefix = `ctxtest-${randomUUID().slice(0, 12)}`;
const redis = new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const name of ['due', 'receipts', 'states', 'dead', 'sent']) await redis.del(`${prefix}:{receipts}:${name}`);
  await redis.quit();
});

async function startSender(url: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['test/faults/receipt-sender-process.ts'], {
    env: {
      PATH: process.env.PATH ?? '',
      REDIS_URL: requireRedis(),
      RECEIPT_QUEUE_PREFIX: prefix,
      CTXFLOW_RECEIPT_URL: url,
      CTXFLOW_RECEIPT_SECRET: SECRET,
      RECEIPT_LEASE_MS: '1500',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`the sender exited (${code})`)));
  });
  return child;
}

describe('receipt sender killed mid-call', () => {
  it('every receipt arrives; the cut calls again under the same id; the queue ends empty', async () => {
    const verifier = new Webhook(SECRET);
    const calls: string[] = [];
    const held: ServerResponse[] = [];
    let holding = true;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
        verifier.verify(Buffer.concat(chunks).toString('utf8'), headers);
        calls.push(headers['webhook-id']!);
        // From the 12th call on, calls are left in flight until the sender is killed.
        if (holding && calls.length >= 12) held.push(res);
        else res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/receipts`;
    try {
      const queue = new RedisReceiptQueue(redis, { prefix });
      const receipts = Array.from({ length: 40 }, () => receipt());
      await queue.enqueue(receipts);

      const first = await startSender(url);
      await waitFor('calls in flight', () => held.length > 0, 30_000);
      const exited = new Promise((resolve) => first.once('exit', resolve));
      first.kill('SIGKILL');
      await exited;
      const cut = new Set(calls.slice(11));
      holding = false;
      for (const res of held) res.destroy();

      await startSender(url);
      const all = receipts.map(receiptId);
      await waitFor('every receipt called', () => all.every((id) => calls.includes(id)), 60_000);
      await waitFor('the queue empty', async () => (await redis.zcard(`${prefix}:{receipts}:due`)) === 0, 30_000);

      expect(new Set(calls)).toEqual(new Set(all));
      const twice = [...new Set(calls.filter((id, i) => calls.indexOf(id) !== i))];
      // Only receipts cut by the kill were called again, each exactly once more.
      expect(twice.every((id) => cut.has(id))).toBe(true);
      expect(twice.length).toBe(cut.size);
      expect(calls.length).toBe(all.length + cut.size);
      expect(await queue.deadLetters()).toEqual([]);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
