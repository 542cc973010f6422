/**
 * The delivery index contract: every adapter of shared/feeds/src/ports/delivery-index.ts
 * passes these tests (in memory, Redis, Redis Cluster).
 */
import { randomUUID } from 'node:crypto';
import type { DeliveryIndex, DeliveryReceipt } from '@ctxflow/feeds';
import { afterEach, describe, expect, it } from 'vitest';

export type DeliveryIndexFactory = (options?: { retainMs?: number }) => Promise<{
  index: DeliveryIndex;
  cleanup(): Promise<void>;
  /** Waits `ms` of the index's time (the memory index's clock moves; Redis waits). */
  pass(ms: number): Promise<void>;
}>;

function receipt(overrides: Partial<DeliveryReceipt> = {}): DeliveryReceipt {
  return {
    tenant: 'acme',
    source: 'zendesk',
    eventId: `evt-${randomUUID()}`,
    sessionId: `ses_${randomUUID()}`,
    stepId: `stp_${randomUUID()}`,
    rowId: 'stp_1.0',
    requestId: `req-${randomUUID()}`,
    at: '2026-01-01T00:00:01.000Z',
    ...overrides,
  };
}

export function deliveryIndexContract(name: string, make: DeliveryIndexFactory): void {
  describe(`DeliveryIndex contract: ${name}`, () => {
    const cleanups: (() => Promise<void>)[] = [];
    const open = async (options?: { retainMs?: number }) => {
      const made = await make(options);
      cleanups.push(async () => {
        await made.cleanup();
        await made.index.close();
      });
      return made;
    };
    afterEach(async () => {
      for (const cleanup of cleanups.splice(0)) await cleanup();
    });

    it('a delivery never recorded has no receipts', async () => {
      const { index } = await open();
      expect(await index.receipts('acme', 'zendesk', `evt-${randomUUID()}`)).toEqual([]);
    });

    it('keeps one receipt per session, in commit order, exactly as recorded', async () => {
      const { index } = await open();
      const first = receipt({ at: '2026-01-01T00:00:01.000Z' });
      const { requestId: _none, ...second } = receipt({ eventId: first.eventId, at: '2026-01-01T00:00:02.000Z' });
      expect(await index.record([second, first])).toEqual([second, first]);
      expect(await index.receipts('acme', 'zendesk', first.eventId)).toEqual([first, second]);
    });

    it('the first receipt of a session stays: a later one is answered with it and changes nothing', async () => {
      const { index } = await open();
      const first = receipt();
      await index.record([first]);
      const later = { ...first, stepId: 'stp_later', rowId: 'stp_later.0', at: '2026-01-01T00:09:00.000Z' };
      expect(await index.record([later, first])).toEqual([first, first]);
      expect(await index.receipts('acme', 'zendesk', first.eventId)).toEqual([first]);
    });

    it('within one write, the first receipt of a session wins', async () => {
      const { index } = await open();
      const first = receipt();
      const again = { ...first, stepId: 'stp_again' };
      expect(await index.record([first, again])).toEqual([first, first]);
      expect(await index.receipts('acme', 'zendesk', first.eventId)).toEqual([first]);
    });

    it('tenants and sources are apart: the same event id of another tenant or source is another delivery', async () => {
      const { index } = await open();
      const acme = receipt();
      const globex = receipt({ tenant: 'globex', eventId: acme.eventId });
      const github = receipt({ source: 'github', eventId: acme.eventId });
      await index.record([acme, globex, github]);
      expect(await index.receipts('acme', 'zendesk', acme.eventId)).toEqual([acme]);
      expect(await index.receipts('globex', 'zendesk', acme.eventId)).toEqual([globex]);
      expect(await index.receipts('acme', 'github', acme.eventId)).toEqual([github]);
      expect(await index.receipts('initech', 'zendesk', acme.eventId)).toEqual([]);
    });

    it('an event id with any characters (colons, braces, unicode) is its own delivery', async () => {
      const { index } = await open();
      const odd = receipt({ eventId: `a:{b}}:ü-${randomUUID()}` });
      await index.record([odd]);
      expect(await index.receipts('acme', 'zendesk', odd.eventId)).toEqual([odd]);
      expect(await index.receipts('acme', 'zendesk', odd.eventId.slice(0, 5))).toEqual([]);
    });

    it("a delivery's receipts end after the retention since its last write", async () => {
      const { index, pass } = await open({ retainMs: 1_000 });
      const first = receipt();
      await index.record([first]);
      await pass(600);
      const second = receipt({ eventId: first.eventId, at: '2026-01-01T00:00:02.000Z' });
      await index.record([second]);
      await pass(600);
      expect(await index.receipts('acme', 'zendesk', first.eventId)).toEqual([first, second]);
      await pass(1_100);
      expect(await index.receipts('acme', 'zendesk', first.eventId)).toEqual([]);
    });

    it('an empty write records nothing', async () => {
      const { index } = await open();
      expect(await index.record([])).toEqual([]);
    });
  });
}
