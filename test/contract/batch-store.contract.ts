import { randomUUID } from 'node:crypto';
import { byteLength } from '@ctxflow/contracts';
import type { BatchStore, SubscriptionStore } from '@ctxflow/step-context';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeUpdate } from '../../services/step-context/test/helpers.ts';

/** Retention (ms) and clock of a store, and whether it appends only to subscribed sessions. */
export interface BatchStoreOptions {
  ttlMs?: number;
  clock?: { now(): number };
  subscribedOnly?: boolean;
}

export interface BatchStoreFixture {
  name: string;
  /**
   * A store on a fresh key space; `cleanup` removes it. `subscriptions`: the subscription
   * store it checks (`subscribedOnly`); `keysOf`: a store with keys lists the session's keys.
   */
  create(options?: BatchStoreOptions): Promise<{
    store: BatchStore;
    cleanup(): Promise<void>;
    subscriptions?: SubscriptionStore;
    keysOf?(sessionId: string): Promise<{ key: string; pttl: number }[]>;
  }>;
}

const all = { maxEntries: 10_000, maxBytes: 100 * 1024 * 1024 };

/** The contract of the BatchStore port (src/batch-store.ts), for every adapter. */
export function batchStoreContract(fixture: BatchStoreFixture): void {
  describe(`BatchStore contract: ${fixture.name}`, () => {
    let store: BatchStore;
    let cleanup: () => Promise<void>;
    const session = () => `s-${randomUUID()}`;
    const topic = () => `topic-${randomUUID().slice(0, 8)}`;

    beforeAll(async () => {
      ({ store, cleanup } = await fixture.create());
    });
    afterAll(async () => {
      await cleanup();
    });

    it('append stamps cursors 1, 2, 3 and readSince returns the entries in order', async () => {
      const s = session();
      const updates = [makeUpdate({ ticket: 'A' }), makeUpdate({ ticket: 'B' }), makeUpdate({ ticket: 'A' })];
      const outcomes = [];
      for (const u of updates) outcomes.push(await store.append(s, u));
      expect(outcomes).toEqual([
        { outcome: 'appended', cursor: 1 },
        { outcome: 'appended', cursor: 2 },
        { outcome: 'appended', cursor: 3 },
      ]);
      expect(await store.readSince(s, 0, all)).toEqual(updates.map((update, i) => ({ cursor: i + 1, update })));
      expect((await store.readSince(s, 2, all)).map((e) => e.cursor)).toEqual([3]);
      expect(await store.readSince(s, 3, all)).toEqual([]);
      expect(await store.readSince(session(), 0, all)).toEqual([]);
    });

    it('append is idempotent by update id', async () => {
      const s = session();
      const u = makeUpdate();
      expect(await store.append(s, u)).toEqual({ outcome: 'appended', cursor: 1 });
      expect(await store.append(s, { ...u, summary: 'other text, same id' })).toEqual({ outcome: 'duplicate' });
      expect(await store.readSince(s, 0, all)).toEqual([{ cursor: 1, update: u }]);
    });

    it('an older version of a ticket than one appended is stale; an equal one is not', async () => {
      const s = session();
      expect((await store.append(s, makeUpdate({ ticket: 'X', version: 5 }))).outcome).toBe('appended');
      expect(await store.append(s, makeUpdate({ ticket: 'X', version: 3 }))).toEqual({ outcome: 'stale' });
      expect((await store.append(s, makeUpdate({ ticket: 'X', version: 5 }))).outcome).toBe('appended');
      // version wins over time when both carry one
      const later = makeUpdate({ ticket: 'X', version: 4, occurredAt: '2030-01-01T00:00:00.000Z' });
      expect(await store.append(s, later)).toEqual({ outcome: 'stale' });
      // another ticket, another session: not affected
      expect((await store.append(s, makeUpdate({ ticket: 'Y', version: 1 }))).outcome).toBe('appended');
      expect((await store.append(session(), makeUpdate({ ticket: 'X', version: 1 }))).outcome).toBe('appended');
      expect((await store.readSince(s, 0, all)).map((e) => e.update.version)).toEqual([5, 5, 1]);
    });

    it('without versions an earlier occurredAt is stale', async () => {
      const s = session();
      await store.append(s, makeUpdate({ ticket: 'X', occurredAt: '2026-01-01T10:00:00.000Z' }));
      expect(await store.append(s, makeUpdate({ ticket: 'X', occurredAt: '2026-01-01T09:59:59.000Z' }))).toEqual({
        outcome: 'stale',
      });
      expect((await store.append(s, makeUpdate({ ticket: 'X', occurredAt: '2026-01-01T10:00:00.000Z' }))).outcome).toBe(
        'appended',
      );
      // one side without a version: compared by time
      await store.append(s, makeUpdate({ ticket: 'X', version: 9, occurredAt: '2026-01-01T11:00:00.000Z' }));
      expect(await store.append(s, makeUpdate({ ticket: 'X', occurredAt: '2026-01-01T10:30:00.000Z' }))).toEqual({
        outcome: 'stale',
      });
      expect((await store.append(s, makeUpdate({ ticket: 'X', occurredAt: 'not a date' }))).outcome).toBe('appended');
      expect(await store.append(s, makeUpdate({ ticket: 'X', version: 8 }))).toEqual({ outcome: 'stale' });
      expect((await store.readSince(s, 0, all)).length).toBe(4);
    });

    it('readSince stops at maxEntries, and after the entry that passes maxBytes', async () => {
      const s = session();
      const updates = Array.from({ length: 5 }, (_, i) =>
        makeUpdate({ ticket: `T${i}`, eventId: `e-${randomUUID()}`, summary: 'x'.repeat(300) }),
      );
      for (const u of updates) await store.append(s, u);
      const size = byteLength(updates[0]); // every update has this size
      const cursors = async (after: number, maxEntries: number, maxBytes: number) =>
        (await store.readSince(s, after, { maxEntries, maxBytes })).map((e) => e.cursor);
      expect(await cursors(0, 2, 1e9)).toEqual([1, 2]);
      expect(await cursors(1, 100, 1)).toEqual([2]);
      expect(await cursors(0, 100, size)).toEqual([1, 2]);
      expect(await cursors(0, 100, 2 * size)).toEqual([1, 2, 3]);
      expect(await cursors(0, 100, 2 * size - 1)).toEqual([1, 2]);
    });

    it('applyUpdate appends to every session and records the offset; at or below it, nothing is written', async () => {
      const [a, b, t] = [session(), session(), topic()];
      const u1 = makeUpdate({ ticket: 'Z' });
      expect(await store.resumeFrom(t, 0)).toBeUndefined();
      expect(await store.applyUpdate(u1, [a, b], { topic: t, partition: 0, offset: '7' })).toEqual({
        applied: true,
        sessions: { [a]: { outcome: 'appended', cursor: 1 }, [b]: { outcome: 'appended', cursor: 1 } },
      });
      expect(await store.resumeFrom(t, 0)).toBe('8');
      const u2 = makeUpdate({ ticket: 'Z' });
      expect(await store.applyUpdate(u2, [a, b], { topic: t, partition: 0, offset: '7' })).toEqual({ applied: false });
      expect(await store.applyUpdate(u2, [a], { topic: t, partition: 0, offset: '6' })).toEqual({ applied: false });
      expect(await store.readSince(a, 0, all)).toEqual([{ cursor: 1, update: u1 }]);
      expect(await store.readSince(b, 0, all)).toEqual([{ cursor: 1, update: u1 }]);
      expect(await store.resumeFrom(t, 0)).toBe('8');
      // the same update at a later offset (a republish) is applied as a duplicate
      expect(await store.applyUpdate(u1, [a], { topic: t, partition: 0, offset: '9' })).toEqual({
        applied: true,
        sessions: { [a]: { outcome: 'duplicate' } },
      });
      expect(await store.resumeFrom(t, 0)).toBe('10');
      // partitions and topics are independent
      expect(await store.resumeFrom(t, 1)).toBeUndefined();
      expect((await store.applyUpdate(u2, [a], { topic: t, partition: 1, offset: '0' })).applied).toBe(true);
      expect(await store.resumeFrom(t, 1)).toBe('1');
      expect(await store.resumeFrom(topic(), 0)).toBeUndefined();
    });

    it('applyUpdate with no session records the offset; offsets beyond 2^53 compare exactly', async () => {
      const t = topic();
      expect(await store.applyUpdate(makeUpdate(), [], { topic: t, partition: 2, offset: '9007199254740993' })).toEqual(
        { applied: true, sessions: {} },
      );
      expect(await store.resumeFrom(t, 2)).toBe('9007199254740994');
      expect(
        await store.applyUpdate(makeUpdate(), [session()], { topic: t, partition: 2, offset: '9007199254740992' }),
      ).toEqual({ applied: false });
      expect(
        (await store.applyUpdate(makeUpdate(), [], { topic: t, partition: 2, offset: '10000000000000000' })).applied,
      ).toBe(true);
      expect(await store.resumeFrom(t, 2)).toBe('10000000000000001');
    });

    it('applyUpdate reports stale and duplicate per session', async () => {
      const [a, b, t] = [session(), session(), topic()];
      await store.append(a, makeUpdate({ ticket: 'Q', version: 10 }));
      const dup = makeUpdate({ ticket: 'Q', version: 11 });
      await store.append(b, dup);
      const old = makeUpdate({ ticket: 'Q', version: 2 });
      expect(await store.applyUpdate(old, [a, b], { topic: t, partition: 0, offset: '0' })).toEqual({
        applied: true,
        sessions: { [a]: { outcome: 'stale' }, [b]: { outcome: 'stale' } },
      });
      expect(await store.applyUpdate(dup, [a, b], { topic: t, partition: 0, offset: '1' })).toEqual({
        applied: true,
        sessions: { [a]: { outcome: 'appended', cursor: 2 }, [b]: { outcome: 'duplicate' } },
      });
    });

    it('recordOffset never moves backwards', async () => {
      const t = topic();
      await store.recordOffset({ topic: t, partition: 0, offset: '41' });
      await store.recordOffset({ topic: t, partition: 0, offset: '3' });
      expect(await store.resumeFrom(t, 0)).toBe('42');
      expect((await store.applyUpdate(makeUpdate(), [], { topic: t, partition: 0, offset: '41' })).applied).toBe(false);
    });

    it('copy gives the branch the same entries and cursors, ids and staleness marks', async () => {
      const [from, to] = [session(), session()];
      const u1 = makeUpdate({ ticket: 'C', version: 4 });
      const u2 = makeUpdate({ ticket: 'D' });
      await store.append(from, u1);
      await store.append(from, u2);
      await store.copy(from, to);
      expect(await store.readSince(to, 0, all)).toEqual([
        { cursor: 1, update: u1 },
        { cursor: 2, update: u2 },
      ]);
      expect(await store.append(to, u2)).toEqual({ outcome: 'duplicate' });
      expect(await store.append(to, makeUpdate({ ticket: 'C', version: 3 }))).toEqual({ outcome: 'stale' });
      const u3 = makeUpdate({ ticket: 'E' });
      expect(await store.append(to, u3)).toEqual({ outcome: 'appended', cursor: 3 });
      // the source is untouched by the branch
      expect((await store.readSince(from, 0, all)).map((e) => e.cursor)).toEqual([1, 2]);
      // repeating the copy keeps the branch's own entry after the source's
      await store.append(from, makeUpdate({ ticket: 'F' }));
      await store.copy(from, to);
      expect((await store.readSince(to, 0, all)).map((e) => [e.cursor, e.update.ticket])).toEqual([
        [1, 'C'],
        [2, 'D'],
        [3, 'F'],
        [4, 'E'],
      ]);
    });

    it('applyUpdate stores the trace context with each appended entry; copy keeps it; untraced entries have none', async () => {
      const [a, b, branch, t] = [session(), session(), session(), topic()];
      const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      const traced = makeUpdate({ ticket: 'T1' });
      const plain = makeUpdate({ ticket: 'T2' });
      await store.applyUpdate(traced, [a, b], { topic: t, partition: 0, offset: '1' }, { traceparent });
      await store.applyUpdate(plain, [a], { topic: t, partition: 0, offset: '2' });
      expect(await store.readSince(a, 0, all)).toEqual([
        { cursor: 1, update: traced, traceparent },
        { cursor: 2, update: plain },
      ]);
      expect(await store.readSince(b, 0, all)).toEqual([{ cursor: 1, update: traced, traceparent }]);
      // a branch's own traced entry, re-stamped after the source's, keeps its trace context too
      await store.applyUpdate(
        makeUpdate({ ticket: 'T3' }),
        [branch],
        { topic: t, partition: 0, offset: '3' },
        {
          traceparent,
        },
      );
      await store.copy(a, branch);
      expect((await store.readSince(branch, 0, all)).map((e) => [e.cursor, e.update.ticket, e.traceparent])).toEqual([
        [1, 'T1', traceparent],
        [2, 'T2', undefined],
        [3, 'T3', traceparent],
      ]);
    });

    it('copy of a session without entries gives an empty stream that starts at cursor 1', async () => {
      const to = session();
      await store.copy(session(), to);
      expect(await store.readSince(to, 0, all)).toEqual([]);
      expect(await store.append(to, makeUpdate())).toEqual({ outcome: 'appended', cursor: 1 });
    });

    it('applyBatch applies a run of records to their sessions in record order and records the last offset', async () => {
      const [a, b, t] = [session(), session(), topic()];
      const at = (offset: string) => ({ topic: t, partition: 3, offset });
      const u1 = makeUpdate({ ticket: 'R', version: 2 });
      const u2 = makeUpdate({ ticket: 'S' });
      const old = makeUpdate({ ticket: 'R', version: 1 });
      const results = await store.applyBatch([
        { position: at('10'), update: u1, sessionIds: [a, b] },
        { position: at('11') }, // nothing to apply: a poison record
        { position: at('12'), update: u2, sessionIds: [b] },
        { position: at('13'), update: u1, sessionIds: [a] }, // the same update published twice
        { position: at('14'), update: old, sessionIds: [a, b] }, // older than u1: stale
        { position: at('15'), update: makeUpdate({ ticket: 'N' }), sessionIds: [] }, // nobody follows it
      ]);
      expect(results).toEqual([
        {
          applied: true,
          sessions: { [a]: { outcome: 'appended', cursor: 1 }, [b]: { outcome: 'appended', cursor: 1 } },
        },
        { applied: true, sessions: {} },
        { applied: true, sessions: { [b]: { outcome: 'appended', cursor: 2 } } },
        { applied: true, sessions: { [a]: { outcome: 'duplicate' } } },
        { applied: true, sessions: { [a]: { outcome: 'stale' }, [b]: { outcome: 'stale' } } },
        { applied: true, sessions: {} },
      ]);
      expect(await store.readSince(a, 0, all)).toEqual([{ cursor: 1, update: u1 }]);
      expect(await store.readSince(b, 0, all)).toEqual([
        { cursor: 1, update: u1 },
        { cursor: 2, update: u2 },
      ]);
      expect(await store.resumeFrom(t, 3)).toBe('16');
      expect(await store.resumeFrom(t, 0)).toBeUndefined();
      expect(await store.applyBatch([])).toEqual([]);
    });

    it('applyBatch skips the records at or below the stored offset and applies the rest once', async () => {
      const [a, b, t] = [session(), session(), topic()];
      const at = (offset: string) => ({ topic: t, partition: 0, offset });
      const u = Array.from({ length: 5 }, (_, i) => makeUpdate({ ticket: `P${i}` }));
      await store.applyBatch([
        { position: at('0'), update: u[0]!, sessionIds: [a] },
        { position: at('1'), update: u[1]!, sessionIds: [a, b] },
        { position: at('2'), update: u[2]!, sessionIds: [b] },
      ]);
      // A redelivery that overlaps what was applied: the prefix is skipped, the rest applied.
      expect(
        await store.applyBatch([
          { position: at('1'), update: u[1]!, sessionIds: [a, b] },
          { position: at('2'), update: u[2]!, sessionIds: [b] },
          { position: at('3') },
          { position: at('4'), update: u[3]!, sessionIds: [a, b] },
        ]),
      ).toEqual([
        { applied: false },
        { applied: false },
        { applied: true, sessions: {} },
        {
          applied: true,
          sessions: { [a]: { outcome: 'appended', cursor: 3 }, [b]: { outcome: 'appended', cursor: 3 } },
        },
      ]);
      expect(await store.resumeFrom(t, 0)).toBe('5');
      // A run wholly at or below the stored offset (a consumer that lost the partition): nothing written.
      expect(
        await store.applyBatch([
          { position: at('3'), update: u[4]!, sessionIds: [a, b] },
          { position: at('4'), update: u[4]!, sessionIds: [a] },
        ]),
      ).toEqual([{ applied: false }, { applied: false }]);
      expect(await store.resumeFrom(t, 0)).toBe('5');
      expect((await store.readSince(a, 0, all)).map((e) => [e.cursor, e.update.ticket])).toEqual([
        [1, 'P0'],
        [2, 'P1'],
        [3, 'P3'],
      ]);
      expect((await store.readSince(b, 0, all)).map((e) => [e.cursor, e.update.ticket])).toEqual([
        [1, 'P1'],
        [2, 'P2'],
        [3, 'P3'],
      ]);
      // applyUpdate and applyBatch share the offset: one at a time after a run.
      expect(await store.applyUpdate(u[4]!, [a], at('4'))).toEqual({ applied: false });
      expect((await store.applyUpdate(u[4]!, [a], at('5'))).applied).toBe(true);
      expect(await store.resumeFrom(t, 0)).toBe('6');
    });

    it('applyBatch stores each record trace context with its entries; offsets beyond 2^53 compare exactly', async () => {
      const [a, t] = [session(), topic()];
      const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      const traced = makeUpdate({ ticket: 'T1' });
      const plain = makeUpdate({ ticket: 'T2' });
      await store.applyBatch([
        {
          position: { topic: t, partition: 1, offset: '9007199254740992' },
          update: traced,
          sessionIds: [a],
          traceparent,
        },
        { position: { topic: t, partition: 1, offset: '9007199254740993' }, update: plain, sessionIds: [a] },
      ]);
      expect(await store.readSince(a, 0, all)).toEqual([
        { cursor: 1, update: traced, traceparent },
        { cursor: 2, update: plain },
      ]);
      expect(await store.resumeFrom(t, 1)).toBe('9007199254740994');
      expect(
        await store.applyBatch([
          { position: { topic: t, partition: 1, offset: '9007199254740993' }, update: makeUpdate(), sessionIds: [a] },
          { position: { topic: t, partition: 1, offset: '9007199254740994' } },
        ]),
      ).toEqual([{ applied: false }, { applied: true, sessions: {} }]);
      expect(await store.resumeFrom(t, 1)).toBe('9007199254740995');
    });

    it('applyBatch refuses a run that spans partitions or whose offsets do not increase, writing nothing', async () => {
      const [a, t] = [session(), topic()];
      const u = makeUpdate();
      await expect(
        store.applyBatch([
          { position: { topic: t, partition: 0, offset: '1' }, update: u, sessionIds: [a] },
          { position: { topic: t, partition: 1, offset: '2' } },
        ]),
      ).rejects.toThrow();
      await expect(
        store.applyBatch([
          { position: { topic: t, partition: 0, offset: '2' }, update: u, sessionIds: [a] },
          { position: { topic: t, partition: 0, offset: '2' } },
        ]),
      ).rejects.toThrow();
      await expect(
        store.applyBatch([
          { position: { topic: t, partition: 0, offset: '3' }, update: u, sessionIds: [a] },
          { position: { topic: t, partition: 0, offset: '1' } },
        ]),
      ).rejects.toThrow();
      expect(await store.readSince(a, 0, all)).toEqual([]);
      expect(await store.resumeFrom(t, 0)).toBeUndefined();
      expect(await store.resumeFrom(t, 1)).toBeUndefined();
    });

    describe('data lifecycle', () => {
      it("erase: the session's entries, cursor, ids and marks go; a repeat does nothing; others stay", async () => {
        const made = await fixture.create();
        try {
          const [s, other, t] = [session(), session(), topic()];
          const u = makeUpdate({ ticket: 'E1', version: 5 });
          await made.store.applyBatch([
            { position: { topic: t, partition: 0, offset: '1' }, update: u, sessionIds: [s, other] },
          ]);
          if (made.keysOf) expect((await made.keysOf(s)).length).toBeGreaterThan(0);
          await made.store.erase(s);
          await made.store.erase(s);
          expect(await made.store.readSince(s, 0, all)).toEqual([]);
          if (made.keysOf) expect(await made.keysOf(s)).toEqual([]);
          expect(await made.store.readSince(other, 0, all)).toEqual([{ cursor: 1, update: u }]);
          // Nothing of it remains: the same id and an older version append again, from cursor 1.
          expect(await made.store.append(s, makeUpdate({ ...u, version: 1 }))).toEqual({
            outcome: 'appended',
            cursor: 1,
          });
          expect(await made.store.resumeFrom(t, 0)).toBe('2');
        } finally {
          await made.cleanup();
        }
      });

      it('subscribedOnly: an update in flight while the session is erased writes nothing for it', async () => {
        const made = await fixture.create({ subscribedOnly: true });
        try {
          const subscriptions = made.subscriptions!;
          const [gone, kept, never, t] = [session(), session(), session(), topic()];
          const ticket = `R-${randomUUID().slice(0, 8)}`;
          await subscriptions.subscribe('tenant-a', gone, { source: 'generic', ticket });
          await subscriptions.subscribe('tenant-a', kept, { source: 'generic', ticket });
          const first = makeUpdate({ tenant: 'tenant-a', ticket });
          await made.store.applyBatch([
            { position: { topic: t, partition: 0, offset: '1' }, update: first, sessionIds: [gone, kept] },
          ]);
          // The look-up named both; then `gone` is erased (subscriptions first); then the apply lands.
          const sessionIds = await subscriptions.sessionsFor({ tenant: 'tenant-a', source: 'generic', ticket });
          expect(sessionIds).toEqual([gone, kept].sort());
          await subscriptions.eraseSession('tenant-a', gone);
          await made.store.erase(gone);
          const late = makeUpdate({ tenant: 'tenant-a', ticket });
          expect(
            await made.store.applyBatch([
              { position: { topic: t, partition: 0, offset: '2' }, update: late, sessionIds: [...sessionIds, never] },
            ]),
          ).toEqual([
            {
              applied: true,
              sessions: {
                [gone]: { outcome: 'unsubscribed' },
                [kept]: { outcome: 'appended', cursor: 2 },
                [never]: { outcome: 'unsubscribed' },
              },
            },
          ]);
          expect(await made.store.readSince(gone, 0, all)).toEqual([]);
          expect(await made.store.readSince(never, 0, all)).toEqual([]);
          if (made.keysOf) {
            expect(await made.keysOf(gone)).toEqual([]);
            expect(await made.keysOf(never)).toEqual([]);
          }
          expect(await made.store.resumeFrom(t, 0)).toBe('3');
          expect(await subscriptions.sessionsFor({ tenant: 'tenant-a', source: 'generic', ticket })).toEqual([kept]);
        } finally {
          await made.cleanup();
        }
      });

      it('retention: every key an apply writes gets the TTL; idle past it, the stream is gone', async () => {
        let now = Date.parse('2026-01-01T00:00:00Z');
        const ttlMs = 60_000;
        const made = await fixture.create({ ttlMs, clock: { now: () => now }, subscribedOnly: true });
        try {
          const [s, t] = [session(), topic()];
          const ticket = `R-${randomUUID().slice(0, 8)}`;
          await made.subscriptions!.subscribe('tenant-a', s, { source: 'generic', ticket });
          const u = makeUpdate({ tenant: 'tenant-a', ticket });
          await made.store.applyBatch([
            { position: { topic: t, partition: 0, offset: '1' }, update: u, sessionIds: [s] },
          ]);
          if (made.keysOf) {
            // Redis keeps time itself: right after the write every key of the session expires within the TTL.
            const keys = await made.keysOf(s);
            expect(keys.length).toBeGreaterThanOrEqual(5); // stream, seq, ids, marks, subscriptions (+ offsets on a cluster)
            for (const { key, pttl } of keys) {
              expect(pttl, key).toBeGreaterThan(0);
              expect(pttl, key).toBeLessThanOrEqual(ttlMs);
            }
            return;
          }
          now += 50_000;
          await made.store.touch(s); // a step read the stream
          now += 50_000;
          expect(await made.store.readSince(s, 0, all)).toEqual([{ cursor: 1, update: u }]);
          now += 10_000;
          expect(await made.store.readSince(s, 0, all)).toEqual([]);
          // Its subscriptions went with it: a later update is not appended.
          const later = makeUpdate({ tenant: 'tenant-a', ticket });
          expect(
            await made.store.applyBatch([
              { position: { topic: t, partition: 0, offset: '2' }, update: later, sessionIds: [s] },
            ]),
          ).toEqual([{ applied: true, sessions: { [s]: { outcome: 'unsubscribed' } } }]);
        } finally {
          await made.cleanup();
        }
      });
    });
  });
}
