/**
 * The feed streams contract: every adapter of the port (memory, Redis, Redis Cluster) passes these tests.
 * Longer than 400 lines: it is the whole port's contract, so that every adapter is held to all of it by one call.
 */
import { randomUUID } from 'node:crypto';
import { byteLength, type TicketUpdate } from '@ctxflow/contracts';
import type { FeedEntry, FeedPosition, FeedStreams } from '@ctxflow/step-context';
import type { SubscriptionStore } from '@ctxflow/subscriptions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeUpdate } from '../../services/step-context/test/helpers.ts';

/** Retention (ms) and clock of the stores. */
export interface FeedStreamsOptions {
  ttlMs?: number;
  clock?: { now(): number };
}

export interface FeedStreamsFixture {
  name: string;
  /**
   * A feed stream store and the subscription store whose followers it reads, on a fresh key
   * space; `cleanup` removes it. `keysOf`: a store with keys lists a session's keys;
   * `keysOfSource`: the keys of a tenant's source (streams, followers, ids, marks, seq).
   */
  create(options?: FeedStreamsOptions): Promise<{
    store: FeedStreams;
    subscriptions: SubscriptionStore;
    cleanup(): Promise<void>;
    keysOf?(sessionId: string): Promise<{ key: string; pttl: number }[]>;
    keysOfSource?(tenant: string, source: string): Promise<{ key: string; pttl: number }[]>;
  }>;
}

const all = { maxEntries: 10_000, maxBytes: 100 * 1024 * 1024 };

/** The contract of the FeedStreams port (ports/feed-streams.ts), for every adapter. */
export function feedStreamsContract(fixture: FeedStreamsFixture): void {
  describe(`FeedStreams contract: ${fixture.name}`, () => {
    let store: FeedStreams;
    let subscriptions: SubscriptionStore;
    let cleanup: () => Promise<void>;
    let keysOf: ((sessionId: string) => Promise<{ key: string; pttl: number }[]>) | undefined;
    const session = () => `s-${randomUUID()}`;
    const topic = () => `topic-${randomUUID().slice(0, 8)}`;
    /** A tenant of its own per test: its sources' sequences start at 1. */
    const tenant = () => `t-${randomUUID().slice(0, 8)}`;
    const read = async (sessionId: string, after: FeedPosition = {}, limits = all) =>
      store.readSince(await subscriptions.follows(sessionId), after, limits);
    const seqs = (entries: FeedEntry[]) => entries.map((e) => e.seq);

    beforeAll(async () => {
      ({ store, subscriptions, cleanup, keysOf } = await fixture.create());
    });
    afterAll(async () => {
      await cleanup();
    });

    it('append stamps a source sequence 1, 2, 3 and readSince returns the entries in order, after a position', async () => {
      const [s, tn] = [session(), tenant()];
      await subscriptions.subscribe(tn, s, { source: 'generic', ticket: '*' });
      const updates = [
        makeUpdate({ tenant: tn, ticket: 'A' }),
        makeUpdate({ tenant: tn, ticket: 'B' }),
        makeUpdate({ tenant: tn, ticket: 'A' }),
      ];
      const outcomes = [];
      for (const u of updates) outcomes.push(await store.append(u));
      // append writes every stream of the update: its ticket's and its source's (no scope).
      expect(outcomes).toEqual([1, 2, 3].map((seq) => ({ outcome: 'appended', seq, streams: 2 })));
      expect(await read(s)).toEqual(updates.map((update, i) => ({ source: 'generic', seq: i + 1, update })));
      expect(seqs(await read(s, { generic: 2 }))).toEqual([3]);
      expect(await read(s, { generic: 3 })).toEqual([]);
      expect(await read(session())).toEqual([]);
      expect(await store.positionOf(tn, 'generic')).toBe(3);
      expect(await store.positionOf(tn, 'jira')).toBe(0);
    });

    it('append is idempotent by update id', async () => {
      const [s, tn] = [session(), tenant()];
      await subscriptions.subscribe(tn, s, { source: 'generic', ticket: 'T-1' });
      const u = makeUpdate({ tenant: tn });
      expect(await store.append(u)).toEqual({ outcome: 'appended', seq: 1, streams: 2 });
      expect(await store.append({ ...u, summary: 'other text, same id' })).toEqual({ outcome: 'duplicate' });
      expect(await read(s)).toEqual([{ source: 'generic', seq: 1, update: u }]);
    });

    it('an older version of a ticket than one stored is stale; an equal one is not', async () => {
      const [s, tn] = [session(), tenant()];
      await subscriptions.subscribe(tn, s, { source: 'generic', ticket: '*' });
      const x = (o: Partial<TicketUpdate>) => makeUpdate({ tenant: tn, ticket: 'X', ...o });
      expect((await store.append(x({ version: 5 }))).outcome).toBe('appended');
      expect(await store.append(x({ version: 3 }))).toEqual({ outcome: 'stale' });
      expect((await store.append(x({ version: 5 }))).outcome).toBe('appended');
      // version wins over time when both carry one
      expect(await store.append(x({ version: 4, occurredAt: '2030-01-01T00:00:00.000Z' }))).toEqual({
        outcome: 'stale',
      });
      // another ticket, another tenant: not affected
      expect((await store.append(makeUpdate({ tenant: tn, ticket: 'Y', version: 1 }))).outcome).toBe('appended');
      expect((await store.append(makeUpdate({ tenant: tenant(), ticket: 'X', version: 1 }))).outcome).toBe('appended');
      expect((await read(s)).map((e) => e.update.version)).toEqual([5, 5, 1]);
    });

    it('without versions an earlier occurredAt is stale', async () => {
      const [s, tn] = [session(), tenant()];
      await subscriptions.subscribe(tn, s, { source: 'generic', ticket: 'X' });
      const x = (o: Partial<TicketUpdate>) => makeUpdate({ tenant: tn, ticket: 'X', ...o });
      await store.append(x({ occurredAt: '2026-01-01T10:00:00.000Z' }));
      expect(await store.append(x({ occurredAt: '2026-01-01T09:59:59.000Z' }))).toEqual({ outcome: 'stale' });
      expect((await store.append(x({ occurredAt: '2026-01-01T10:00:00.000Z' }))).outcome).toBe('appended');
      // one side without a version: compared by time
      await store.append(x({ version: 9, occurredAt: '2026-01-01T11:00:00.000Z' }));
      expect(await store.append(x({ occurredAt: '2026-01-01T10:30:00.000Z' }))).toEqual({ outcome: 'stale' });
      expect((await store.append(x({ occurredAt: 'not a date' }))).outcome).toBe('appended');
      expect(await store.append(x({ version: 8 }))).toEqual({ outcome: 'stale' });
      expect((await read(s)).length).toBe(4);
    });

    it('readSince stops at maxEntries, and after the entry that passes maxBytes', async () => {
      const [s, tn] = [session(), tenant()];
      await subscriptions.subscribe(tn, s, { source: 'generic', ticket: '*' });
      const updates = Array.from({ length: 5 }, (_, i) =>
        makeUpdate({ tenant: tn, ticket: `T${i}`, eventId: `e-${randomUUID()}`, summary: 'x'.repeat(300) }),
      );
      for (const u of updates) await store.append(u);
      const size = byteLength(updates[0]); // every update has this size
      const at = async (after: number, maxEntries: number, maxBytes: number) =>
        seqs(await read(s, { generic: after }, { maxEntries, maxBytes }));
      expect(await at(0, 2, 1e9)).toEqual([1, 2]);
      expect(await at(1, 100, 1)).toEqual([2]);
      expect(await at(0, 100, size)).toEqual([1, 2]);
      expect(await at(0, 100, 2 * size)).toEqual([1, 2, 3]);
      expect(await at(0, 100, 2 * size - 1)).toEqual([1, 2]);
    });

    it('a subscription reads only what was stored after it started; a ticket and a wildcard covering it give each update once', async () => {
      const [early, late, tn] = [session(), session(), tenant()];
      const exact = { source: 'github', ticket: 'octo/app#1' } as const;
      const wildcard = { source: 'github', ticket: '*', scope: 'octo/app' } as const;
      await subscriptions.subscribe(tn, early, exact);
      await subscriptions.subscribe(tn, early, wildcard);
      const gh = (ticket: string) => makeUpdate({ tenant: tn, source: 'github', ticket, scope: 'octo/app' });
      const u1 = gh('octo/app#1');
      await store.append(u1);
      await subscriptions.subscribe(tn, late, wildcard);
      const [u2, u3] = [gh('octo/app#2'), gh('octo/app#1')];
      await store.append(u2);
      await store.append(u3);
      expect((await read(early)).map((e) => [e.seq, e.update.id])).toEqual([
        [1, u1.id],
        [2, u2.id],
        [3, u3.id],
      ]);
      expect((await read(late)).map((e) => [e.seq, e.update.id])).toEqual([
        [2, u2.id],
        [3, u3.id],
      ]);
      // A position before a subscription started does not reach back past its start.
      expect(seqs(await read(late, { github: 0 }))).toEqual([2, 3]);
    });

    it('readSince answers a prefix of what is new in each source, however long its streams', async () => {
      const [s, tn] = [session(), tenant()];
      await subscriptions.subscribe(tn, s, { source: 'generic', ticket: 'A' });
      await subscriptions.subscribe(tn, s, { source: 'generic', ticket: 'B' });
      await subscriptions.subscribe(tn, s, { source: 'jira', ticket: 'J' });
      // 300 updates: A in bursts, B now and then, J every third; all through their own streams.
      const stored: string[] = [];
      for (let i = 0; i < 300; i++) {
        const u =
          i % 3 === 2
            ? makeUpdate({ tenant: tn, source: 'jira', ticket: 'J' })
            : makeUpdate({ tenant: tn, ticket: i % 50 < 40 ? 'A' : 'B' });
        await store.append(u);
        stored.push(u.id);
      }
      const seen: string[] = [];
      let position: Record<string, number> = {};
      for (let round = 0; round < 100; round++) {
        const entries = await read(s, position, { maxEntries: 70, maxBytes: 1e9 });
        if (entries.length === 0) break;
        expect(entries.length).toBeLessThanOrEqual(70);
        for (const e of entries) {
          expect(e.seq).toBeGreaterThan(position[e.source] ?? 0);
          position = { ...position, [e.source]: e.seq };
          seen.push(e.update.id);
        }
      }
      expect([...seen].sort()).toEqual([...stored].sort());
      expect(new Set(seen).size).toBe(300);
      expect(position).toEqual({ generic: 200, jira: 100 });
    });

    it("an update is stored only in its tenant's streams that a live session follows", async () => {
      const [a, b, t] = [session(), session(), topic()];
      const [ta, tb] = [tenant(), tenant()];
      await subscriptions.subscribe(ta, a, { source: 'jira', ticket: 'PROJ-1' });
      await subscriptions.subscribe(tb, b, { source: 'jira', ticket: '*', scope: 'PROJ' });
      const at = (offset: string) => ({ topic: t, partition: 0, offset });
      const ofA = makeUpdate({ tenant: ta, source: 'jira', ticket: 'PROJ-1', scope: 'PROJ' });
      const unwatched = makeUpdate({ tenant: ta, source: 'jira', ticket: 'PROJ-2', scope: 'PROJ' });
      const ofB = makeUpdate({ tenant: tb, source: 'jira', ticket: 'PROJ-1', scope: 'PROJ' });
      expect(await store.applyUpdate(ofA, at('0'))).toEqual({
        applied: true,
        outcome: { outcome: 'appended', seq: 1, streams: 1 },
      });
      expect(await store.applyUpdate(unwatched, at('1'))).toEqual({
        applied: true,
        outcome: { outcome: 'unwatched' },
      });
      expect(await store.positionOf(ta, 'jira')).toBe(1);
      expect(await store.applyUpdate(ofB, at('2'))).toEqual({
        applied: true,
        outcome: { outcome: 'appended', seq: 1, streams: 1 },
      });
      expect((await read(a)).map((e) => e.update.id)).toEqual([ofA.id]);
      expect((await read(b)).map((e) => e.update.id)).toEqual([ofB.id]);
      expect(await store.resumeFrom(t, 0)).toBe('3');
    });

    it('applyUpdate records the offset; at or below it, nothing is written', async () => {
      const [a, t, tn] = [session(), topic(), tenant()];
      await subscriptions.subscribe(tn, a, { source: 'generic', ticket: 'Z' });
      const u1 = makeUpdate({ tenant: tn, ticket: 'Z' });
      const u2 = makeUpdate({ tenant: tn, ticket: 'Z' });
      const pos = (offset: string) => ({ topic: t, partition: 3, offset });
      expect((await store.applyUpdate(u1, pos('10'))).applied).toBe(true);
      expect(await store.applyUpdate(u2, pos('10'))).toEqual({ applied: false });
      expect(await store.applyUpdate(u2, pos('9'))).toEqual({ applied: false });
      expect(await store.applyUpdate(u1, pos('11'))).toEqual({ applied: true, outcome: { outcome: 'duplicate' } });
      expect((await read(a)).map((e) => e.update.id)).toEqual([u1.id]);
      expect(await store.resumeFrom(t, 3)).toBe('12');
      expect(await store.resumeFrom(t, 0)).toBeUndefined();
    });

    it('recordOffset never moves backwards; offsets beyond 2^53 compare exactly', async () => {
      const t = topic();
      await store.recordOffset({ topic: t, partition: 0, offset: '9007199254740993' });
      await store.recordOffset({ topic: t, partition: 0, offset: '9007199254740992' });
      expect(await store.resumeFrom(t, 0)).toBe('9007199254740994');
      await store.recordOffset({ topic: t, partition: 0, offset: '9007199254740999' });
      expect(await store.resumeFrom(t, 0)).toBe('9007199254741000');
    });

    it('applyRun applies a run in record order, records the last offset, and skips what was consumed', async () => {
      const [a, b, t, tn] = [session(), session(), topic(), tenant()];
      await subscriptions.subscribe(tn, a, { source: 'generic', ticket: 'P1' });
      await subscriptions.subscribe(tn, b, { source: 'generic', ticket: '*' });
      const at = (offset: string) => ({ topic: t, partition: 0, offset });
      const u = Array.from({ length: 5 }, (_, i) => makeUpdate({ tenant: tn, ticket: `P${i}` }));
      expect(
        await store.applyRun([
          { position: at('0'), update: u[0]! },
          { position: at('1'), update: u[1]! },
          { position: at('2'), update: u[1]! },
        ]),
      ).toEqual([
        { applied: true, outcome: { outcome: 'appended', seq: 1, streams: 1 } },
        { applied: true, outcome: { outcome: 'appended', seq: 2, streams: 2 } },
        { applied: true, outcome: { outcome: 'duplicate' } },
      ]);
      // A redelivery that overlaps what was applied: the prefix is skipped, the rest applied.
      expect(
        await store.applyRun([
          { position: at('1'), update: u[1]! },
          { position: at('2'), update: u[1]! },
          { position: at('3') },
          { position: at('4'), update: u[2]! },
        ]),
      ).toEqual([
        { applied: false },
        { applied: false },
        { applied: true },
        { applied: true, outcome: { outcome: 'appended', seq: 3, streams: 1 } },
      ]);
      expect(await store.resumeFrom(t, 0)).toBe('5');
      // A run wholly at or below the stored offset (a consumer that lost the partition): nothing written.
      expect(
        await store.applyRun([
          { position: at('3'), update: u[3]! },
          { position: at('4'), update: u[4]! },
        ]),
      ).toEqual([{ applied: false }, { applied: false }]);
      expect(await store.resumeFrom(t, 0)).toBe('5');
      expect((await read(a)).map((e) => [e.seq, e.update.ticket])).toEqual([[2, 'P1']]);
      expect((await read(b)).map((e) => [e.seq, e.update.ticket])).toEqual([
        [1, 'P0'],
        [2, 'P1'],
        [3, 'P2'],
      ]);
      // applyUpdate and applyRun share the offset: one at a time after a run.
      expect(await store.applyUpdate(u[4]!, at('4'))).toEqual({ applied: false });
      expect((await store.applyUpdate(u[4]!, at('5'))).applied).toBe(true);
      expect(await store.resumeFrom(t, 0)).toBe('6');
      expect(await store.applyRun([])).toEqual([]);
    });

    it('applyRun stores each record trace context with its entries; offsets beyond 2^53 compare exactly', async () => {
      const [a, t, tn] = [session(), topic(), tenant()];
      await subscriptions.subscribe(tn, a, { source: 'generic', ticket: '*' });
      const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      const traced = makeUpdate({ tenant: tn, ticket: 'T1' });
      const plain = makeUpdate({ tenant: tn, ticket: 'T2' });
      await store.applyRun([
        { position: { topic: t, partition: 1, offset: '9007199254740992' }, update: traced, traceparent },
        { position: { topic: t, partition: 1, offset: '9007199254740993' }, update: plain },
      ]);
      expect(await read(a)).toEqual([
        { source: 'generic', seq: 1, update: traced, traceparent },
        { source: 'generic', seq: 2, update: plain },
      ]);
      expect(await store.resumeFrom(t, 1)).toBe('9007199254740994');
      expect(
        await store.applyRun([
          { position: { topic: t, partition: 1, offset: '9007199254740993' }, update: makeUpdate({ tenant: tn }) },
          { position: { topic: t, partition: 1, offset: '9007199254740994' } },
        ]),
      ).toEqual([{ applied: false }, { applied: true }]);
      expect(await store.resumeFrom(t, 1)).toBe('9007199254740995');
    });

    it('storedPartition and rebindPartition: a topic id bound with the offset; a reset forgets what was consumed', async () => {
      const [a, t, tn] = [session(), topic(), tenant()];
      await subscriptions.subscribe(tn, a, { source: 'generic', ticket: '*' });
      const at = (offset: string) => ({ topic: t, partition: 0, offset });
      const u = Array.from({ length: 4 }, (_, i) => makeUpdate({ tenant: tn, ticket: `O${i}` }));
      expect(await store.storedPartition(t, 0)).toEqual({});
      await store.applyRun([
        { position: at('5'), update: u[0]! },
        { position: at('6'), update: u[1]! },
      ]);
      expect(await store.storedPartition(t, 0)).toEqual({ offset: '6' });
      // Bound: the offset stays.
      expect(await store.rebindPartition(t, 0, { offset: '6' }, { offset: '6', topicId: 'log-a' })).toBe(true);
      expect(await store.storedPartition(t, 0)).toEqual({ offset: '6', topicId: 'log-a' });
      expect(await store.resumeFrom(t, 0)).toBe('7');
      // Not what is stored any more: nothing written.
      expect(await store.rebindPartition(t, 0, { offset: '6' }, {})).toBe(false);
      expect(await store.rebindPartition(t, 0, { offset: '5', topicId: 'log-a' }, {})).toBe(false);
      expect(await store.storedPartition(t, 0)).toEqual({ offset: '6', topicId: 'log-a' });
      // Reset to a new log: its records at offsets consumed before apply, a repeated update is dropped by id.
      expect(await store.rebindPartition(t, 0, { offset: '6', topicId: 'log-a' }, { topicId: 'log-b' })).toBe(true);
      expect(await store.storedPartition(t, 0)).toEqual({ topicId: 'log-b' });
      expect(await store.resumeFrom(t, 0)).toBeUndefined();
      expect(
        await store.applyRun([
          { position: at('0'), update: u[2]! },
          { position: at('1'), update: u[0]! },
        ]),
      ).toEqual([
        { applied: true, outcome: { outcome: 'appended', seq: 3, streams: 1 } },
        { applied: true, outcome: { outcome: 'duplicate' } },
      ]);
      expect(await store.storedPartition(t, 0)).toEqual({ offset: '1', topicId: 'log-b' });
      // Reset forward (to a log's end): what is at or below the new offset is consumed.
      expect(
        await store.rebindPartition(t, 0, { offset: '1', topicId: 'log-b' }, { offset: '9', topicId: 'log-b' }),
      ).toBe(true);
      expect(await store.applyRun([{ position: at('9'), update: u[3]! }])).toEqual([{ applied: false }]);
      expect(await store.applyRun([{ position: at('10'), update: u[3]! }])).toEqual([
        { applied: true, outcome: { outcome: 'appended', seq: 4, streams: 1 } },
      ]);
      expect(await store.resumeFrom(t, 0)).toBe('11');
      expect((await read(a)).map((e) => e.update.ticket)).toEqual(['O0', 'O1', 'O2', 'O3']);
      // Another partition is untouched.
      expect(await store.storedPartition(t, 1)).toEqual({});
    });

    it('applyRun refuses a run that spans partitions or whose offsets do not increase, writing nothing', async () => {
      const [a, t, tn] = [session(), topic(), tenant()];
      await subscriptions.subscribe(tn, a, { source: 'generic', ticket: 'T-1' });
      const u = makeUpdate({ tenant: tn });
      await expect(
        store.applyRun([
          { position: { topic: t, partition: 0, offset: '1' }, update: u },
          { position: { topic: t, partition: 1, offset: '2' } },
        ]),
      ).rejects.toThrow();
      await expect(
        store.applyRun([
          { position: { topic: t, partition: 0, offset: '2' }, update: u },
          { position: { topic: t, partition: 0, offset: '2' } },
        ]),
      ).rejects.toThrow();
      await expect(
        store.applyRun([{ position: { topic: t, partition: 0, offset: 'x' }, update: u }]),
      ).rejects.toThrow();
      expect(await read(a)).toEqual([]);
      expect(await store.resumeFrom(t, 0)).toBeUndefined();
    });

    it('a branch (copySession) reads what its source reads, from the same position', async () => {
      const [src, branch, tn] = [session(), session(), tenant()];
      await subscriptions.subscribe(tn, src, { source: 'generic', ticket: 'C' });
      const u1 = makeUpdate({ tenant: tn, ticket: 'C' });
      await store.append(u1);
      await subscriptions.copySession(tn, src, branch);
      await subscriptions.copySession(tn, src, branch); // safe to repeat
      const u2 = makeUpdate({ tenant: tn, ticket: 'C' });
      await store.append(u2);
      expect(await read(branch)).toEqual(await read(src));
      expect(seqs(await read(branch, { generic: 1 }))).toEqual([2]);
    });

    describe('data lifecycle', () => {
      it('erasure: a session without subscriptions reads nothing, and an update only it followed is stored nowhere', async () => {
        const [gone, kept, t, tn] = [session(), session(), topic(), tenant()];
        await subscriptions.subscribe(tn, gone, { source: 'generic', ticket: 'E-1' });
        await subscriptions.subscribe(tn, kept, { source: 'generic', ticket: 'E-2' });
        await store.applyUpdate(makeUpdate({ tenant: tn, ticket: 'E-1' }), { topic: t, partition: 0, offset: '0' });
        await subscriptions.eraseSession(tn, gone);
        await subscriptions.eraseSession(tn, gone); // idempotent
        expect(await read(gone)).toEqual([]);
        const later = makeUpdate({ tenant: tn, ticket: 'E-1' });
        expect(await store.applyUpdate(later, { topic: t, partition: 0, offset: '1' })).toEqual({
          applied: true,
          outcome: { outcome: 'unwatched' },
        });
        const other = makeUpdate({ tenant: tn, ticket: 'E-2' });
        expect((await store.applyUpdate(other, { topic: t, partition: 0, offset: '2' })).applied).toBe(true);
        expect((await read(kept)).map((e) => e.update.id)).toEqual([other.id]);
        if (keysOf) expect(await keysOf(gone)).toEqual([]);
      });

      it('retention: streams expire when no write touched them for the TTL; a session idle past it is no follower', async () => {
        let now = Date.parse('2026-01-01T00:00:00.000Z');
        const clock = { now: () => now };
        const ttlMs = 60_000;
        const own = await fixture.create({ ttlMs, clock });
        try {
          const tn = tenant();
          const [s, t] = [session(), topic()];
          const readOwn = async (id: string) => own.store.readSince(await own.subscriptions.follows(id), {}, all);
          await own.subscriptions.subscribe(tn, s, { source: 'generic', ticket: 'R' });
          const u = makeUpdate({ tenant: tn, ticket: 'R' });
          expect((await own.store.applyUpdate(u, { topic: t, partition: 0, offset: '0' })).applied).toBe(true);
          expect(await readOwn(s)).toHaveLength(1);
          if (own.keysOfSource) {
            const keys = await own.keysOfSource(tn, 'generic');
            const ttls = keys.filter((k) => !k.key.endsWith(':seq')).map((k) => k.pttl);
            expect(ttls.length).toBeGreaterThan(0);
            for (const pttl of ttls) expect(pttl).toBeGreaterThan(0);
            // The sequence never expires: positions refer to it.
            expect(keys.find((k) => k.key.endsWith(':seq'))?.pttl).toBe(-1);
          }
          // A step refreshes the session; past 1.25 x the TTL without one, it follows nothing live.
          now += ttlMs * 2;
          const after = makeUpdate({ tenant: tn, ticket: 'R' });
          expect(await own.store.applyUpdate(after, { topic: t, partition: 0, offset: '1' })).toEqual({
            applied: true,
            outcome: { outcome: 'unwatched' },
          });
        } finally {
          await own.cleanup();
        }
      });
    });
  });
}
