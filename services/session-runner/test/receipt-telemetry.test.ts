/**
 * The receipt webhook's instruments read through the SDK's metric reader (createTestTelemetry):
 * the gauge of dead-lettered receipts waiting follows the queue's count on each collection (in
 * memory and on Redis), a count that fails observes nothing, and closed telemetry stops reading it.
 */
import { randomUUID } from 'node:crypto';
import type { DeliveryReceipt } from '@ctxflow/feeds';
import { createTestTelemetry, METRIC_RECEIPT_DEAD_LETTERS, type TestTelemetry } from '@ctxflow/telemetry';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { requireRedis } from '../../../test/support/services.ts';
import { MemoryReceiptQueue } from '../src/adapters/memory-receipt-queue.ts';
import { RedisReceiptQueue } from '../src/adapters/redis-receipt-queue.ts';
import type { ReceiptQueue } from '../src/ports/receipt-queue.ts';
import { createReceiptTelemetry } from '../src/receipt-sender.ts';

const LEASE_MS = 60_000;
const GAUGE = METRIC_RECEIPT_DEAD_LETTERS.replaceAll('.', '_');

function receipt(): DeliveryReceipt {
  return {
    tenant: 'acme',
    source: 'generic',
    eventId: `evt_${randomUUID()}`,
    sessionId: `ses_${randomUUID()}`,
    stepId: 'stp_1',
    rowId: 'stp_1.0',
    at: '2026-01-01T00:00:00.000Z',
  };
}

/** The gauge's lines in the exposition (name and value), none when it has no point. */
async function gaugeLines(t: TestTelemetry): Promise<string[]> {
  return (await t.metricsText())
    .split('\n')
    .filter((line) => line.startsWith(`${GAUGE}{`) || line.startsWith(`${GAUGE} `))
    .map((line) => `${line.split(/[{ ]/)[0]} ${line.split(' ').at(-1)}`);
}

let telemetry: TestTelemetry | undefined;
afterEach(async () => {
  await telemetry?.shutdown();
  telemetry = undefined;
});

let redis: Redis | undefined;
const prefix = `ctxtest-${randomUUID().slice(0, 12)}`;
afterAll(async () => {
  for (const name of ['due', 'receipts', 'states', 'dead', 'sent']) await redis?.del(`${prefix}:{receipts}:${name}`);
  await redis?.quit();
});

const queues: [string, () => ReceiptQueue][] = [
  ['memory', () => new MemoryReceiptQueue()],
  [
    'redis',
    () => {
      redis ??= new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
      return new RedisReceiptQueue(redis, { prefix });
    },
  ],
];

describe.each(queues)('the dead-letter gauge on the %s queue', (_, makeQueue) => {
  it('reads the dead-lettered receipts waiting: 0, then each dead letter, less each replay', async () => {
    telemetry = createTestTelemetry();
    const queue = makeQueue();
    createReceiptTelemetry({ meter: telemetry.meter }, () => queue.deadLetterCount());
    expect(await gaugeLines(telemetry)).toEqual([`${GAUGE} 0`]);

    await queue.enqueue([receipt(), receipt(), receipt()]);
    const [a, b, c] = await queue.take(3, LEASE_MS);
    expect(await queue.deadLetter(a!, 'http 410')).toBe(true);
    expect(await queue.deadLetter(b!, 'http 503')).toBe(true);
    expect(await queue.retry(c!, 60_000, 'http 503')).toBe(true);
    expect(await telemetry.metric(METRIC_RECEIPT_DEAD_LETTERS)).toBe(2);

    expect((await queue.replay([a!.id])).map((d) => d.id)).toEqual([a!.id]);
    expect(await telemetry.metric(METRIC_RECEIPT_DEAD_LETTERS)).toBe(1);
    const [again] = await queue.take(1, LEASE_MS);
    await queue.complete(again!);
    await queue.replay();
    expect(await gaugeLines(telemetry)).toEqual([`${GAUGE} 0`]);
  });
});

describe('the dead-letter gauge', () => {
  it('a count that fails observes nothing (the last value read stays); the next one reads again', async () => {
    telemetry = createTestTelemetry();
    const failing = () => Promise.reject(new Error('store_unavailable'));
    let answer: () => Promise<number> = failing;
    createReceiptTelemetry({ meter: telemetry.meter }, () => answer());
    expect(await gaugeLines(telemetry)).toEqual([]);
    answer = async () => 4;
    expect(await gaugeLines(telemetry)).toEqual([`${GAUGE} 4`]);
    answer = failing;
    expect(await gaugeLines(telemetry)).toEqual([`${GAUGE} 4`]);
    answer = async () => 1;
    expect(await gaugeLines(telemetry)).toEqual([`${GAUGE} 1`]);
  });

  it('is not read once the telemetry is closed', async () => {
    telemetry = createTestTelemetry();
    let reads = 0;
    const receipts = createReceiptTelemetry({ meter: telemetry.meter }, async () => {
      reads += 1;
      return 3;
    });
    expect(await gaugeLines(telemetry)).toEqual([`${GAUGE} 3`]);
    receipts.close?.();
    await telemetry.metricsText();
    expect(reads).toBe(1);
  });

  it('without a count, only the calls counter: no gauge', async () => {
    telemetry = createTestTelemetry();
    const receipts = createReceiptTelemetry({ meter: telemetry.meter });
    receipts.called('dead_lettered');
    expect(
      await telemetry.metric('ctxflow.receipt_webhook.calls', { 'ctxflow.receipt.outcome': 'dead_lettered' }),
    ).toBe(1);
    expect(await gaugeLines(telemetry)).toEqual([]);
  });
});
