import { type ClaimOutcome, MemoryDeliveryLedger } from '@ctxflow/feed-ingestor';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

/**
 * The ledger's rules, plainly: an entry counts while `now` is before its end;
 * a claim first drops every entry that ended (as Redis drops an expired key,
 * gone even if the clock is then set back).
 */
class ModelLedger {
  readonly entries = new Map<string, { state: 'pending' | 'done'; expiresAt: number }>();
  claim(id: string, leaseMs: number, now: number): ClaimOutcome {
    for (const [key, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(key);
    const entry = this.entries.get(id);
    if (entry && entry.expiresAt > now) return entry.state === 'done' ? 'done' : 'in_flight';
    this.entries.set(id, { state: 'pending', expiresAt: now + leaseMs });
    return 'claimed';
  }
  confirm(id: string, retainMs: number, now: number): void {
    this.entries.set(id, { state: 'done', expiresAt: now + retainMs });
  }
  release(id: string): void {
    if (this.entries.get(id)?.state === 'pending') this.entries.delete(id);
  }
}

const id = fc.integer({ min: 0, max: 40 }).map((n) => `generic:${n}`);
const ms = fc.integer({ min: 0, max: 1000 });
const op = fc.oneof(
  fc.record({ kind: fc.constant('claim' as const), id, ms }),
  fc.record({ kind: fc.constant('confirm' as const), id, ms }),
  fc.record({ kind: fc.constant('release' as const), id }),
  // The clock moves on, stands still or (a wall clock set back) goes back a little.
  fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: -20, max: 60 }) }),
);

describe('MemoryDeliveryLedger', () => {
  it('answers every claim as the rules say, whatever the leases, retentions and clock, and holds only the ids not ended after a claim', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 300 }), async (ops) => {
        let now = 1_000_000;
        const ledger = new MemoryDeliveryLedger({ clock: () => now });
        const model = new ModelLedger();
        for (const o of ops) {
          if (o.kind === 'tick') now += o.ms;
          else if (o.kind === 'claim') {
            expect(await ledger.claim(o.id, o.ms)).toBe(model.claim(o.id, o.ms, now));
            // A claim sweeps: the ledger holds what the model holds.
            expect(ledger.size).toBe(model.entries.size);
          } else if (o.kind === 'confirm') {
            await ledger.confirm(o.id, o.ms);
            model.confirm(o.id, o.ms, now);
          } else {
            await ledger.release(o.id);
            model.release(o.id);
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('drops ids in the order they end, whatever the order they were written in', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: 500 }), { minLength: 1, maxLength: 300 }), async (leases) => {
        let now = 0;
        const ledger = new MemoryDeliveryLedger({ clock: () => now });
        // An id retained past the end: claiming it answers done and writes nothing, so a claim only sweeps.
        await ledger.claim('generic:anchor', 1);
        await ledger.confirm('generic:anchor', 10_000);
        for (const [i, lease] of leases.entries()) await ledger.claim(`generic:${i}`, lease);
        for (now = 0; now <= 501; now++) {
          expect(await ledger.claim('generic:anchor', 1)).toBe('done');
          expect(ledger.size).toBe(1 + leases.filter((lease) => lease > now).length);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('holds only the ids still retained: 100,000 deliveries over an hour with a 10-minute retention', async () => {
    let now = Date.parse('2024-05-01T00:00:00Z');
    const ledger = new MemoryDeliveryLedger({ clock: () => now });
    for (let i = 0; i < 100_000; i++) {
      now += 36; // 100,000 deliveries in 3,600 s
      expect(await ledger.claim(`generic:${i}`, 30_000)).toBe('claimed');
      await ledger.confirm(`generic:${i}`, 600_000);
    }
    // The last 10 minutes' deliveries (600,000 / 36 = 16,666.7): the older ones were dropped.
    expect(ledger.size).toBe(16_667);
    expect(await ledger.claim('generic:99999', 30_000)).toBe('done');
    expect(await ledger.claim('generic:0', 30_000)).toBe('claimed');
  });
});
