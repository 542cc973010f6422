/**
 * The receipt queue contract: every adapter of the port in
 * services/session-runner/src/ports/receipt-queue.ts passes these tests (the in-memory
 * queue, the Redis queue on a real Redis and a Redis Cluster).
 */
import { randomUUID } from 'node:crypto';
import type { DeliveryReceipt } from '@ctxflow/feeds';
import { type ReceiptQueue, receiptId } from '@ctxflow/session-runner';
import { afterEach, describe, expect, it } from 'vitest';

export interface ReceiptQueueOptions {
  sentKeepMs?: number;
}

export type ReceiptQueueFactory = (options?: ReceiptQueueOptions) => Promise<{
  queue: ReceiptQueue;
  cleanup(): Promise<void>;
  /** Waits `ms` of the queue's time (the memory queue's clock moves; Redis waits). */
  pass(ms: number): Promise<void>;
}>;

const byId = (a: { id: string }, b: { id: string }) => a.id.localeCompare(b.id);

/** A lease long enough that a loaded machine's next call comes within it. */
const LEASE_MS = 1_000;

export function receipt(overrides: Partial<DeliveryReceipt> = {}): DeliveryReceipt {
  return {
    tenant: 'acme',
    source: 'zendesk',
    eventId: `evt_${randomUUID()}`,
    sessionId: `ses_${randomUUID()}`,
    stepId: `stp_${randomUUID()}`,
    rowId: `row_${randomUUID()}`,
    requestId: `req_${randomUUID()}`,
    at: '2026-01-01T00:00:00.000Z',
    ...overrides,
  };
}

export function receiptQueueContract(name: string, make: ReceiptQueueFactory): void {
  describe(`receipt queue contract: ${name}`, () => {
    const cleanups: (() => Promise<void>)[] = [];
    afterEach(async () => {
      for (const cleanup of cleanups.splice(0)) await cleanup();
    });
    async function open(options?: ReceiptQueueOptions) {
      const made = await make(options);
      cleanups.push(made.cleanup);
      return made;
    }

    it('hands each enqueued receipt out once, with its id, as enqueued, oldest first', async () => {
      const { queue, pass } = await open();
      const first = receipt();
      const { requestId: _, ...second } = receipt({ tenant: 'globex', source: 'generic' });
      await queue.enqueue([first]);
      await pass(5); // within one millisecond the order is the ids'
      await queue.enqueue([second]);
      const taken = await queue.take(10, LEASE_MS);
      expect(taken.map(({ id, receipt, attempts }) => ({ id, receipt, attempts }))).toEqual([
        { id: receiptId(first), receipt: first, attempts: 0 },
        { id: receiptId(second), receipt: second, attempts: 0 },
      ]);
      expect(await queue.take(10, LEASE_MS)).toEqual([]);
    });

    it('enqueue is idempotent per (tenant, source, eventId, sessionId), whatever else differs', async () => {
      const { queue, pass } = await open();
      const one = receipt();
      await queue.enqueue([one, one]);
      await queue.enqueue([{ ...one, stepId: 'stp_other', rowId: 'row_other' }]);
      const other = receipt({ eventId: one.eventId });
      await pass(5); // within one millisecond the order is the ids'
      await queue.enqueue([other]);
      const taken = await queue.take(10, LEASE_MS);
      expect(taken.map((t) => t.receipt)).toEqual([one, other]);
    });

    it('takes at most max; a leased receipt is not taken again until its lease runs out', async () => {
      const { queue, pass } = await open();
      const receipts = [receipt(), receipt(), receipt()];
      await queue.enqueue(receipts);
      const [a, b] = await Promise.all([queue.take(2, LEASE_MS), queue.take(2, LEASE_MS)]);
      const ids = [...a!, ...b!].map((t) => t.id).sort();
      expect(ids).toEqual(receipts.map(receiptId).sort());
      expect(await queue.take(10, LEASE_MS)).toEqual([]);
      await pass(LEASE_MS + 100);
      const again = await queue.take(10, LEASE_MS);
      expect(again.map((t) => t.id).sort()).toEqual(receipts.map(receiptId).sort());
      expect(again.every((t) => t.attempts === 0)).toBe(true);
    });

    it('complete removes a receipt, and the same receipt enqueued again is not added', async () => {
      const { queue, pass } = await open();
      const one = receipt();
      await queue.enqueue([one]);
      const [taken] = await queue.take(1, LEASE_MS);
      await queue.complete(taken!);
      await queue.enqueue([one]);
      await pass(LEASE_MS + 100);
      expect(await queue.take(10, LEASE_MS)).toEqual([]);
      expect(await queue.deadLetters()).toEqual([]);
    });

    it('a sent id is forgotten after the keep time: enqueued again, it is added', async () => {
      const { queue, pass } = await open({ sentKeepMs: 300 });
      const one = receipt();
      await queue.enqueue([one]);
      await queue.complete((await queue.take(1, LEASE_MS))[0]!);
      await pass(400);
      await queue.enqueue([one]);
      expect((await queue.take(1, LEASE_MS)).map((t) => t.id)).toEqual([receiptId(one)]);
    });

    it('retry counts the attempt and makes the receipt due after the delay', async () => {
      const { queue, pass } = await open();
      const one = receipt();
      await queue.enqueue([one]);
      const [taken] = await queue.take(1, LEASE_MS);
      expect(await queue.retry(taken!, LEASE_MS, 'http 503')).toBe(true);
      expect(await queue.take(1, LEASE_MS)).toEqual([]);
      await pass(LEASE_MS + 100);
      const [again] = await queue.take(1, LEASE_MS);
      expect({ id: again!.id, attempts: again!.attempts }).toEqual({ id: receiptId(one), attempts: 1 });
    });

    it('retry and deadLetter with a lost lease change nothing and answer false', async () => {
      const { queue, pass } = await open();
      await queue.enqueue([receipt()]);
      const [stale] = await queue.take(1, 300);
      await pass(400);
      const [current] = await queue.take(1, LEASE_MS);
      expect(current!.id).toBe(stale!.id);
      expect(await queue.retry(stale!, 0, 'http 500')).toBe(false);
      expect(await queue.deadLetter(stale!, 'http 410')).toBe(false);
      expect(await queue.deadLetters()).toEqual([]);
      expect(await queue.deadLetterCount()).toBe(0);
      expect(await queue.take(1, LEASE_MS)).toEqual([]);
      expect(await queue.retry(current!, 0, 'http 500')).toBe(true);
      expect((await queue.take(1, LEASE_MS))[0]!.attempts).toBe(1);
    });

    it('release makes a receipt due at once without counting an attempt', async () => {
      const { queue } = await open();
      const one = receipt();
      await queue.enqueue([one]);
      const [taken] = await queue.take(1, LEASE_MS);
      await queue.release(taken!);
      const [again] = await queue.take(1, LEASE_MS);
      expect({ id: again!.id, attempts: again!.attempts }).toEqual({ id: receiptId(one), attempts: 0 });
    });

    it('a dead-lettered receipt is listed, never taken, not enqueued again, and replayed once', async () => {
      const { queue } = await open();
      const one = receipt();
      const two = receipt();
      await queue.enqueue([one, two]);
      const taken = await queue.take(2, LEASE_MS);
      expect(await queue.deadLetterCount()).toBe(0);
      expect(await queue.retry(taken[0]!, 0, 'http 503')).toBe(true);
      const [retaken] = await queue.take(1, LEASE_MS);
      expect(await queue.deadLetter(retaken!, 'http 503')).toBe(true);
      expect(await queue.deadLetterCount()).toBe(1);
      expect(await queue.deadLetter(taken[1]!, 'http 410')).toBe(true);
      expect(await queue.deadLetterCount()).toBe(2);
      // Dead-lettered within one millisecond, the two may list in either order.
      const dead = (await queue.deadLetters()).sort(byId);
      expect(dead.map(({ at: _, ...d }) => d)).toEqual(
        [
          { id: taken[0]!.id, receipt: taken[0]!.receipt, attempts: 2, error: 'http 503' },
          { id: taken[1]!.id, receipt: taken[1]!.receipt, attempts: 1, error: 'http 410' },
        ].sort(byId),
      );
      expect(dead.every((d) => Number.isInteger(d.at) && d.at > 0)).toBe(true);
      await queue.enqueue([one, two]);
      expect(await queue.take(10, LEASE_MS)).toEqual([]);
      expect(await queue.deadLetterCount()).toBe(2);

      expect((await queue.replay([receiptId(two), 'rcpt_unknown'])).map((d) => d.id)).toEqual([receiptId(two)]);
      expect((await queue.deadLetters()).map((d) => d.id)).toEqual([receiptId(one)]);
      expect(await queue.deadLetterCount()).toBe(1);
      expect(await queue.replay()).toMatchObject([{ id: receiptId(one), receipt: one }]);
      expect(await queue.replay()).toEqual([]);
      expect(await queue.deadLetters()).toEqual([]);
      expect(await queue.deadLetterCount()).toBe(0);
      const again = await queue.take(10, LEASE_MS);
      expect(again.map(({ id, attempts }) => ({ id, attempts })).sort(byId)).toEqual(
        [
          { id: receiptId(one), attempts: 0 },
          { id: receiptId(two), attempts: 0 },
        ].sort(byId),
      );
    });

    it('a receipt delivered by a stale holder is complete even if dead-lettered meanwhile', async () => {
      const { queue, pass } = await open();
      const one = receipt();
      await queue.enqueue([one]);
      const [stale] = await queue.take(1, 300);
      await pass(400);
      const [current] = await queue.take(1, LEASE_MS);
      expect(await queue.deadLetter(current!, 'http 410')).toBe(true);
      expect(await queue.deadLetterCount()).toBe(1);
      await queue.complete(stale!);
      expect(await queue.deadLetters()).toEqual([]);
      expect(await queue.deadLetterCount()).toBe(0);
      expect(await queue.replay()).toEqual([]);
    });

    it('tells its listeners after an enqueue or a replay that added receipts', async () => {
      const { queue } = await open();
      let calls = 0;
      let woke: () => void = () => {};
      queue.onEnqueue(() => {
        calls += 1;
        woke();
      });
      const one = receipt();
      const first = new Promise<void>((resolve) => {
        woke = resolve;
      });
      await queue.enqueue([one]);
      await first;
      expect(calls).toBe(1);
      await queue.enqueue([one]);
      await queue.enqueue([]);
      const [taken] = await queue.take(1, LEASE_MS);
      await queue.deadLetter(taken!, 'http 400');
      const second = new Promise<void>((resolve) => {
        woke = resolve;
      });
      await queue.replay();
      await second;
      expect(calls).toBe(2);
    });
  });
}
