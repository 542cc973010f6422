import type { FeedSource } from '@ctxflow/contracts';
import type { TenantSecret } from '@ctxflow/feeds';
import { describe, expect, it } from 'vitest';
import { feedApp, fixture, genericHeaders, githubHeaders, jiraHeaders, zendeskHeaders } from '../helpers.ts';

/** Two tenants' secrets for every source. */
const secretOf = (tenant: string, source: FeedSource) => `${tenant}-${source}-secret`;
const pairs = (source: FeedSource): TenantSecret[] =>
  ['ta', 'tb'].map((tenant) => ({ tenant, secret: secretOf(tenant, source) }));
const SECRETS = { generic: pairs('generic'), github: pairs('github'), jira: pairs('jira'), zendesk: pairs('zendesk') };

/** One delivery of each source, signed with `tenant`'s secret of that source. */
const deliveries: { source: FeedSource; body: Buffer; headers: (tenant: string) => Record<string, string> }[] = [
  {
    source: 'generic',
    body: fixture('generic-update.json'),
    headers: (t) => genericHeaders(fixture('generic-update.json'), undefined, secretOf(t, 'generic')),
  },
  {
    source: 'github',
    body: fixture('github-issues-opened.json'),
    headers: (t) => githubHeaders(fixture('github-issues-opened.json'), 'issues', 'gh-d-1', secretOf(t, 'github')),
  },
  {
    source: 'jira',
    body: fixture('jira-issue-created.json'),
    headers: (t) => jiraHeaders(fixture('jira-issue-created.json'), secretOf(t, 'jira')),
  },
  {
    source: 'zendesk',
    body: fixture('zendesk-ticket-status-changed.json'),
    headers: (t) => zendeskHeaders(fixture('zendesk-ticket-status-changed.json'), undefined, secretOf(t, 'zendesk')),
  },
];

describe('feeds of several tenants', () => {
  for (const d of deliveries) {
    it(`${d.source}: each tenant's secret verifies and tags its own tenant; the same event of both is published for both`, async () => {
      const { app, publisher } = await feedApp({ secrets: SECRETS });
      const post = (tenant: string) =>
        app.inject({ method: 'POST', url: `/feeds/${d.source}`, headers: d.headers(tenant), payload: d.body });
      const a = await post('ta');
      const b = await post('tb');
      expect([a.statusCode, b.statusCode]).toEqual([202, 202]);
      // Same event id from both tenants: neither is the other's duplicate.
      expect(a.json().duplicate).toBeUndefined();
      expect(b.json().duplicate).toBeUndefined();
      expect(a.json().id).toBe(b.json().id);
      const published = publisher.published.map((p) => JSON.parse(p.record.value));
      expect(published.map((u) => u.tenant)).toEqual(['ta', 'tb']);
      expect(published[0]).toEqual({ ...published[1], tenant: 'ta' });
      // A repeat of each is still published once per tenant.
      expect((await post('ta')).json()).toEqual({ accepted: true, id: a.json().id, duplicate: true });
      expect((await post('tb')).json()).toEqual({ accepted: true, id: b.json().id, duplicate: true });
      expect(publisher.published).toHaveLength(2);
      // A secret of neither tenant: 401, nothing published.
      const stranger = await post('tc');
      expect(stranger.statusCode).toBe(401);
      expect(stranger.json().error.code).toBe('unauthorized');
      expect(publisher.published).toHaveLength(2);
      await app.close();
    });
  }

  it('a tenant with two secrets (rotation) is tagged by either', async () => {
    const { app, publisher } = await feedApp({
      secrets: { generic: [...SECRETS.generic, { tenant: 'ta', secret: 'ta-rotated' }] },
    });
    const body = Buffer.from(JSON.stringify({ eventId: 'rot-1', ticket: 'T-1', summary: 'rotated' }));
    const res = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: genericHeaders(body, undefined, 'ta-rotated'),
      payload: body,
    });
    expect(res.statusCode).toBe(202);
    expect(JSON.parse(publisher.published[0]!.record.value).tenant).toBe('ta');
    await app.close();
  });
});
