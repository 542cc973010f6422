import { randomUUID } from 'node:crypto';
import type { SubscriptionStore } from '@ctxflow/step-context';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

export interface SubscriptionStoreFixture {
  name: string;
  create(): Promise<{ store: SubscriptionStore; cleanup(): Promise<void> }>;
}

/** The contract of the SubscriptionStore port (src/subscription-store.ts), for every adapter. */
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
      expect(await store.subscribe(s, { source: 'jira', ticket: `PROJ-1-${run}` })).toBe(true);
      expect(await store.subscribe(s, { source: 'jira', ticket: `PROJ-1-${run}` })).toBe(false);
      expect(await store.subscribe(s, { source: 'github', ticket: '*', scope: `octo/listed-${run}` })).toBe(true);
      expect(await store.subscribe(s, { source: 'generic', ticket: '*' })).toBe(true);
      expect(await store.list(s)).toEqual([
        { source: 'generic', ticket: '*' },
        { source: 'github', ticket: '*', scope: `octo/listed-${run}` },
        { source: 'jira', ticket: `PROJ-1-${run}` },
      ]);
      expect(await store.unsubscribe(s, { source: 'generic', ticket: '*' })).toBe(true);
      expect(await store.unsubscribe(s, { source: 'generic', ticket: '*' })).toBe(false);
      expect(await store.unsubscribe(s, { source: 'github', ticket: '*' })).toBe(false);
      expect(await store.list(s)).toHaveLength(2);
      expect(await store.list(session('nobody'))).toEqual([]);
    });

    it('sessionsFor matches exact tickets and scoped wildcards, each session once, sorted', async () => {
      const repo = `octo/app-${run}`;
      const ticket = `${repo}#12`;
      const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((n) => session(`match-${n}`)) as [string, string, string, string];
      await store.subscribe(b, { source: 'github', ticket });
      await store.subscribe(a, { source: 'github', ticket: '*', scope: repo });
      await store.subscribe(a, { source: 'github', ticket }); // both: still once
      await store.subscribe(c, { source: 'github', ticket: '*', scope: `${repo}-other` });
      await store.subscribe(d, { source: 'jira', ticket }); // other source
      expect(await store.sessionsFor({ source: 'github', ticket, scope: repo })).toEqual([a, b]);
      expect(await store.sessionsFor({ source: 'github', ticket: `${repo}#13`, scope: repo })).toEqual([a]);
      expect(await store.sessionsFor({ source: 'github', ticket: `${repo}#13` })).toEqual([]);
      expect(await store.sessionsFor({ source: 'zendesk', ticket, scope: repo })).toEqual([]);
      await store.unsubscribe(a, { source: 'github', ticket: '*', scope: repo });
      expect(await store.sessionsFor({ source: 'github', ticket, scope: repo })).toEqual([a, b]);
      await store.unsubscribe(a, { source: 'github', ticket });
      expect(await store.sessionsFor({ source: 'github', ticket, scope: repo })).toEqual([b]);
    });

    it('an unscoped generic wildcard matches every generic ticket', async () => {
      const s = session('generic');
      const t = session('generic-exact');
      await store.subscribe(s, { source: 'generic', ticket: '*' });
      await store.subscribe(t, { source: 'generic', ticket: `INC-${run}` });
      const found = await store.sessionsFor({ source: 'generic', ticket: `INC-${run}` });
      expect(found).toContain(s);
      expect(found).toContain(t);
      expect(await store.sessionsFor({ source: 'generic', ticket: `other-${run}` })).toContain(s);
      expect(await store.sessionsFor({ source: 'generic', ticket: `other-${run}` })).not.toContain(t);
      await store.unsubscribe(s, { source: 'generic', ticket: '*' });
      expect(await store.sessionsFor({ source: 'generic', ticket: `other-${run}` })).not.toContain(s);
    });

    it('sessionsForMany answers sessionsFor of each update, in order, in one look-up', async () => {
      const repo = `octo/many-${run}`;
      const [a, b, c] = ['a', 'b', 'c'].map((n) => session(`many-${n}`)) as [string, string, string];
      await store.subscribe(a, { source: 'github', ticket: `${repo}#1` });
      await store.subscribe(b, { source: 'github', ticket: '*', scope: repo });
      await store.subscribe(c, { source: 'jira', ticket: `MANY-${run}` });
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
      await store.unsubscribe(b, { source: 'github', ticket: '*', scope: repo });
      expect(await store.sessionsForMany(updates.slice(0, 2))).toEqual([[a], []]);
    });
  });
}
