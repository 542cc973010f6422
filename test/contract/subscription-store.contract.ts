import { randomUUID } from 'node:crypto';
import { DEFAULT_TENANT } from '@ctxflow/contracts';
import type { SubscriptionStore } from '@ctxflow/subscriptions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

export interface SubscriptionStoreFixture {
  name: string;
  /** `keysOf`: a store with keys lists the session's keys with their PTTL (ms). */
  create(options?: { ttlMs?: number; clock?: { now(): number } }): Promise<{
    store: SubscriptionStore;
    cleanup(): Promise<void>;
    keysOf?(sessionId: string): Promise<{ key: string; pttl: number }[]>;
  }>;
}

/**
 * The contract of the SubscriptionStore port (src/subscription-store.ts), for
 * every adapter. Updates without `tenant` are the single-tenant default's.
 */
export function subscriptionStoreContract(fixture: SubscriptionStoreFixture): void {
  describe(`SubscriptionStore contract: ${fixture.name}`, () => {
    let store: SubscriptionStore;
    let cleanup: () => Promise<void>;
    // Ticket names unique per run: sessionsFor looks across sessions.
    const run = randomUUID().slice(0, 8);
    const session = (name: string) => `${name}-${run}`;

    beforeAll(async () => {
      ({ store, cleanup } = await fixture.create());
    });
    afterAll(async () => {
      await cleanup();
    });

    it('subscribe and unsubscribe are idempotent; list is sorted', async () => {
      const s = session('list');
      expect(await store.subscribe(DEFAULT_TENANT, s, { source: 'jira', ticket: `PROJ-1-${run}` })).toBe(true);
      expect(await store.subscribe(DEFAULT_TENANT, s, { source: 'jira', ticket: `PROJ-1-${run}` })).toBe(false);
      expect(
        await store.subscribe(DEFAULT_TENANT, s, { source: 'github', ticket: '*', scope: `octo/listed-${run}` }),
      ).toBe(true);
      expect(await store.subscribe(DEFAULT_TENANT, s, { source: 'generic', ticket: '*' })).toBe(true);
      expect(await store.list(s)).toEqual([
        { source: 'generic', ticket: '*' },
        { source: 'github', ticket: '*', scope: `octo/listed-${run}` },
        { source: 'jira', ticket: `PROJ-1-${run}` },
      ]);
      expect(await store.unsubscribe(DEFAULT_TENANT, s, { source: 'generic', ticket: '*' })).toBe(true);
      expect(await store.unsubscribe(DEFAULT_TENANT, s, { source: 'generic', ticket: '*' })).toBe(false);
      expect(await store.unsubscribe(DEFAULT_TENANT, s, { source: 'github', ticket: '*' })).toBe(false);
      expect(await store.list(s)).toHaveLength(2);
      expect(await store.list(session('nobody'))).toEqual([]);
    });

    it('sessionsFor matches exact tickets and scoped wildcards, each session once, sorted', async () => {
      const repo = `octo/app-${run}`;
      const ticket = `${repo}#12`;
      const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((n) => session(`match-${n}`)) as [string, string, string, string];
      await store.subscribe(DEFAULT_TENANT, b, { source: 'github', ticket });
      await store.subscribe(DEFAULT_TENANT, a, { source: 'github', ticket: '*', scope: repo });
      await store.subscribe(DEFAULT_TENANT, a, { source: 'github', ticket }); // both: still once
      await store.subscribe(DEFAULT_TENANT, c, { source: 'github', ticket: '*', scope: `${repo}-other` });
      await store.subscribe(DEFAULT_TENANT, d, { source: 'jira', ticket }); // other source
      expect(await store.sessionsFor({ source: 'github', ticket, scope: repo })).toEqual([a, b]);
      expect(await store.sessionsFor({ source: 'github', ticket: `${repo}#13`, scope: repo })).toEqual([a]);
      expect(await store.sessionsFor({ source: 'github', ticket: `${repo}#13` })).toEqual([]);
      expect(await store.sessionsFor({ source: 'zendesk', ticket, scope: repo })).toEqual([]);
      await store.unsubscribe(DEFAULT_TENANT, a, { source: 'github', ticket: '*', scope: repo });
      expect(await store.sessionsFor({ source: 'github', ticket, scope: repo })).toEqual([a, b]);
      await store.unsubscribe(DEFAULT_TENANT, a, { source: 'github', ticket });
      expect(await store.sessionsFor({ source: 'github', ticket, scope: repo })).toEqual([b]);
    });

    it('an unscoped generic wildcard matches every generic ticket', async () => {
      const s = session('generic');
      const t = session('generic-exact');
      await store.subscribe(DEFAULT_TENANT, s, { source: 'generic', ticket: '*' });
      await store.subscribe(DEFAULT_TENANT, t, { source: 'generic', ticket: `INC-${run}` });
      const found = await store.sessionsFor({ source: 'generic', ticket: `INC-${run}` });
      expect(found).toContain(s);
      expect(found).toContain(t);
      expect(await store.sessionsFor({ source: 'generic', ticket: `other-${run}` })).toContain(s);
      expect(await store.sessionsFor({ source: 'generic', ticket: `other-${run}` })).not.toContain(t);
      await store.unsubscribe(DEFAULT_TENANT, s, { source: 'generic', ticket: '*' });
      expect(await store.sessionsFor({ source: 'generic', ticket: `other-${run}` })).not.toContain(s);
    });

    it('sessionsForMany answers sessionsFor of each update, in order, in one look-up', async () => {
      const repo = `octo/many-${run}`;
      const [a, b, c] = ['a', 'b', 'c'].map((n) => session(`many-${n}`)) as [string, string, string];
      await store.subscribe(DEFAULT_TENANT, a, { source: 'github', ticket: `${repo}#1` });
      await store.subscribe(DEFAULT_TENANT, b, { source: 'github', ticket: '*', scope: repo });
      await store.subscribe(DEFAULT_TENANT, c, { source: 'jira', ticket: `MANY-${run}` });
      const updates = [
        { source: 'github' as const, ticket: `${repo}#1`, scope: repo },
        { source: 'github' as const, ticket: `${repo}#2`, scope: repo },
        { source: 'jira' as const, ticket: `MANY-${run}` },
        { source: 'github' as const, ticket: `${repo}#1` }, // no scope: the wildcard does not match
        { source: 'github' as const, ticket: `${repo}#1`, scope: repo }, // a repeat answers the same
        { source: 'zendesk' as const, ticket: `nobody-${run}`, scope: `acct-${run}` },
      ];
      const many = await store.sessionsForMany(updates);
      expect(many).toEqual([[a, b], [b], [c], [a], [a, b], []]);
      expect(many).toEqual(await Promise.all(updates.map((u) => store.sessionsFor(u))));
      expect(await store.sessionsForMany([])).toEqual([]);
      await store.unsubscribe(DEFAULT_TENANT, b, { source: 'github', ticket: '*', scope: repo });
      expect(await store.sessionsForMany(updates.slice(0, 2))).toEqual([[a], []]);
    });
    it('a subscription matches only updates of its own tenant, wildcards included', async () => {
      const [ta, tb] = [`ta-${run}`, `tb-${run}`];
      const [a, b] = [session('tenant-a'), session('tenant-b')];
      const repo = `octo/tenants-${run}`;
      const ticket = `INC-${run}`;
      for (const [tenant, s] of [
        [ta, a],
        [tb, b],
      ] as const) {
        expect(await store.subscribe(tenant, s, { source: 'generic', ticket: '*' })).toBe(true);
        expect(await store.subscribe(tenant, s, { source: 'generic', ticket })).toBe(true);
        expect(await store.subscribe(tenant, s, { source: 'github', ticket: '*', scope: repo })).toBe(true);
      }
      const ofA = { tenant: ta, source: 'generic' as const, ticket };
      const ofB = { tenant: tb, source: 'generic' as const, ticket: `other-${run}` };
      const repoOfA = { tenant: ta, source: 'github' as const, ticket: `${repo}#1`, scope: repo };
      expect(await store.sessionsFor(ofA)).toEqual([a]);
      expect(await store.sessionsFor(ofB)).toEqual([b]);
      expect(await store.sessionsFor(repoOfA)).toEqual([a]);
      expect(await store.sessionsForMany([ofA, ofB, repoOfA])).toEqual([[a], [b], [a]]);
      // Without a tenant an update is the default tenant's: neither ta's nor tb's.
      expect(await store.sessionsFor({ source: 'generic', ticket })).not.toContain(a);
      expect(await store.sessionsFor({ source: 'generic', ticket })).not.toContain(b);
      expect(await store.sessionsFor({ tenant: `tc-${run}`, source: 'generic', ticket })).toEqual([]);
      // Unsubscribing one tenant's session leaves the other tenant's subscription alone.
      expect(await store.unsubscribe(ta, a, { source: 'generic', ticket: '*' })).toBe(true);
      expect(await store.unsubscribe(ta, a, { source: 'generic', ticket })).toBe(true);
      expect(await store.sessionsFor(ofA)).toEqual([]);
      expect(await store.sessionsFor({ ...ofA, tenant: tb })).toEqual([b]);
      expect(await store.list(a)).toEqual([{ source: 'github', ticket: '*', scope: repo }]);
    });

    it('an update without tenant and one of the default tenant reach the same sessions', async () => {
      const s = session('default-tenant');
      const ticket = `DEF-${run}`;
      await store.subscribe(DEFAULT_TENANT, s, { source: 'jira', ticket });
      expect(await store.sessionsFor({ source: 'jira', ticket })).toEqual([s]);
      expect(await store.sessionsFor({ tenant: DEFAULT_TENANT, source: 'jira', ticket })).toEqual([s]);
      expect(await store.sessionsFor({ tenant: `ta-${run}`, source: 'jira', ticket })).toEqual([]);
    });

    it('eraseSession: no subscriber set names the session and it lists nothing; a repeat does nothing', async () => {
      const [gone, kept] = [session('erased'), session('kept')];
      const ticket = `ERASE-${run}`;
      const scope = `octo/erased-${run}`;
      for (const s of [gone, kept]) {
        await store.subscribe('te', s, { source: 'jira', ticket });
        await store.subscribe('te', s, { source: 'github', ticket: '*', scope });
      }
      await store.eraseSession('te', gone);
      await store.eraseSession('te', gone);
      expect(await store.list(gone)).toEqual([]);
      expect(await store.sessionsFor({ tenant: 'te', source: 'jira', ticket })).toEqual([kept]);
      expect(await store.sessionsFor({ tenant: 'te', source: 'github', ticket: 'o#1', scope })).toEqual([kept]);
      expect((await store.list(kept)).length).toBe(2);
    });

    it('prune keeps every entry of a session that holds the subscriptions; removes only what it lacks', async () => {
      const [held, gone] = [session('prune-held'), session('prune-gone')];
      const ticket = `PRUNE-${run}`;
      await store.subscribe('tp', held, { source: 'jira', ticket });
      await store.subscribe('tp', gone, { source: 'jira', ticket });
      await store.eraseSession('tp', gone);
      await store.prune({ tenant: 'tp', source: 'jira', ticket }, [held, gone]);
      await store.prune({ tenant: 'tp', source: 'jira', ticket }, [held, gone]);
      expect(await store.sessionsFor({ tenant: 'tp', source: 'jira', ticket })).toEqual([held]);
      expect(await store.list(held)).toEqual([{ source: 'jira', ticket }]);
    });

    it('retention: a subscription expires with its session, refreshed by each subscribe', async () => {
      let now = Date.parse('2026-01-01T00:00:00Z');
      const ttlMs = 60_000;
      const made = await fixture.create({ ttlMs, clock: { now: () => now } });
      try {
        const s = session('ttl');
        const ticket = `TTL-${run}`;
        await made.store.subscribe('tt', s, { source: 'jira', ticket });
        if (made.keysOf) {
          const keys = await made.keysOf(s);
          expect(keys.length).toBe(1);
          expect(keys[0]!.pttl).toBeGreaterThan(0);
          expect(keys[0]!.pttl).toBeLessThanOrEqual(ttlMs);
          return;
        }
        now += 50_000;
        await made.store.subscribe('tt', s, { source: 'jira', ticket: `${ticket}-b` });
        now += 50_000;
        expect((await made.store.list(s)).length).toBe(2);
        now += 10_000;
        expect(await made.store.sessionsFor({ tenant: 'tt', source: 'jira', ticket })).toEqual([]);
        expect(await made.store.list(s)).toEqual([]);
      } finally {
        await made.cleanup();
      }
    });
  });
}
