import { type ClaimOutcome, MemoryDeliveryLedger } from '@ctxflow/feeds';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

/** The ledger's rules, plainly, nothing ever dropped: an entry counts while `now` is before its end. */
class ModelLedger {
  readonly entries = new Map<string, { state: 'pending' | 'done'; expiresAt: number }>();
  claim(id: string, leaseMs: number, now: number): ClaimOutcome {
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
  /** Entries that still count. */
  live(now: number): number {
    let n = 0;
    for (const entry of this.entries.values()) if (entry.expiresAt > now) n += 1;
    return n;
  }
}

const id = fc.integer({ min: 0, max: 40 }).map((n) => `generic:${n}`);
const ms = fc.integer({ min: 0, max: 1000 });
const tick = fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 0, max: 60 }) });

describe('MemoryDeliveryLedger', () => {
  it('answers every claim as the rules say, whatever the leases, retentions and order of calls', async () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('claim' as const), id, ms }),
      fc.record({ kind: fc.constant('confirm' as const), id, ms }),
      fc.record({ kind: fc.constant('release' as const), id }),
      tick,
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 300 }), async (ops) => {
        let now = 1_000_000;
        const ledger = new MemoryDeliveryLedger({ clock: () => now });
        const model = new ModelLedger();
        for (const o of ops) {
          if (o.kind === 'tick') now += o.ms;
          else if (o.kind === 'claim') expect(await ledger.claim(o.id, o.ms)).toBe(model.claim(o.id, o.ms, now));
          else if (o.kind === 'confirm') {
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

  it('used as the routes use it (one lease, one retention), holds only the ids that still count after a claim', async () => {
    // A delivery: claim; if claimed, confirm (published) or release (the bus refused), now or a little later.
    const op = fc.oneof(
      fc.record({ kind: fc.constant('deliver' as const), id, outcome: fc.constantFrom('confirm', 'release', 'later') }),
      fc.record({ kind: fc.constant('settle' as const), outcome: fc.constantFrom('confirm', 'release') }),
      tick,
    );
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 300 }),
        fc.integer({ min: 0, max: 2000 }),
        fc.array(op, { maxLength: 300 }),
        async (leaseMs, retainMs, ops) => {
          let now = 1_000_000;
          const ledger = new MemoryDeliveryLedger({ clock: () => now });
          const model = new ModelLedger();
          const inFlight: string[] = [];
          const settle = async (key: string, outcome: string) => {
            if (outcome === 'confirm') {
              await ledger.confirm(key, retainMs);
              model.confirm(key, retainMs, now);
            } else {
              await ledger.release(key);
              model.release(key);
            }
          };
          for (const o of ops) {
            if (o.kind === 'tick') now += o.ms;
            else if (o.kind === 'settle') {
              const key = inFlight.shift();
              if (key !== undefined) await settle(key, o.outcome);
            } else {
              const answer = await ledger.claim(o.id, leaseMs);
              expect(answer).toBe(model.claim(o.id, leaseMs, now));
              // What the claim left: every id that still counts, none that ended.
              expect(ledger.size).toBe(model.live(now));
              if (answer !== 'claimed') continue;
              if (o.outcome === 'later') inFlight.push(o.id);
              else await settle(o.id, o.outcome);
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a released id claimed again does not hold back the ids claimed in between', async () => {
    let now = 0;
    const ledger = new MemoryDeliveryLedger({ clock: () => now });
    await ledger.claim('generic:x', 100);
    now = 1;
    await ledger.claim('generic:a', 100);
    await ledger.release('generic:a');
    now = 2;
    await ledger.claim('generic:b', 100);
    now = 50;
    expect(await ledger.claim('generic:a', 100)).toBe('claimed');
    // x (ended 100) and b (ended 102) are dropped; a's new lease runs to 150.
    now = 120;
    expect(await ledger.claim('generic:c', 100)).toBe('claimed');
    expect(ledger.size).toBe(2);
    expect(await ledger.claim('generic:b', 100)).toBe('claimed');
    expect(await ledger.claim('generic:a', 100)).toBe('in_flight');
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
