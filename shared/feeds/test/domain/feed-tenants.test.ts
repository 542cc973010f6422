import type { FeedSource } from '@ctxflow/contracts';
import type { TenantSecret } from '@ctxflow/feeds';
import { describe, expect, it } from 'vitest';
import {
  feedApp,
  fixture,
  genericHeaders,
  githubHeaders,
  jiraHeaders,
  standardHeaders,
  zendeskHeaders,
} from '../helpers.ts';

/**
 * A tenant's secret of a source (`ta-old`, `ta-new`: the two of a tenant
 * rotating): base64 after `whsec_` for the Standard Webhooks feeds, plain
 * text for the others.
 */
const secretOf = (tenant: string, source: FeedSource) =>
  source === 'incidentio' || source === 'servicenow'
    ? `whsec_${Buffer.from(`${tenant}-${source}-secret`).toString('base64')}`
    : `${tenant}-${source}-secret`;
const pairs = (source: FeedSource): TenantSecret[] =>
  ['ta', 'tb'].map((tenant) => ({ tenant, secret: secretOf(tenant, source) }));
const SOURCES = ['generic', 'github', 'incidentio', 'jira', 'servicenow', 'zendesk', 'cloudevents'] as const;
const SECRETS = Object.fromEntries(SOURCES.map((source) => [source, pairs(source)]));

const CE_BODY = JSON.stringify({
  specversion: '1.0',
  id: 'ce-tenants-1',
  source: 'https://jira.example.com',
  type: 'dev.ctxflow.ticket.updated',
  subject: 'PROJ-7',
  data: { summary: 'Customer replied' },
});
const ce = (headers: Record<string, string>) => ({ ...headers, 'content-type': 'application/cloudevents+json' });

/** One delivery of each source and signature scheme, signed with `tenant`'s secret of that source. */
const deliveries: {
  name: string;
  source: FeedSource;
  body: Buffer;
  headers: (tenant: string) => Record<string, string>;
}[] = [
  {
    name: 'generic',
    source: 'generic',
    body: fixture('generic-update.json'),
    headers: (t) => genericHeaders(fixture('generic-update.json'), undefined, secretOf(t, 'generic')),
  },
  {
    name: 'generic, Standard Webhooks',
    source: 'generic',
    body: fixture('generic-update.json'),
    headers: (t) => standardHeaders(fixture('generic-update.json'), 'msg-generic-1', secretOf(t, 'generic')),
  },
  {
    name: 'cloudevents',
    source: 'cloudevents',
    body: Buffer.from(CE_BODY),
    headers: (t) => ce(genericHeaders(CE_BODY, undefined, secretOf(t, 'cloudevents'))),
  },
  {
    name: 'cloudevents, Standard Webhooks',
    source: 'cloudevents',
    body: Buffer.from(CE_BODY),
    headers: (t) => ce(standardHeaders(CE_BODY, 'msg-ce-1', secretOf(t, 'cloudevents'))),
  },
  {
    name: 'incidentio',
    source: 'incidentio',
    body: fixture('incidentio-incident-created.json'),
    headers: (t) =>
      standardHeaders(fixture('incidentio-incident-created.json'), 'msg-inc-1', secretOf(t, 'incidentio')),
  },
  {
    name: 'servicenow',
    source: 'servicenow',
    body: fixture('servicenow-incident-commented.json'),
    headers: (t) =>
      standardHeaders(fixture('servicenow-incident-commented.json'), 'sn-rec.7', secretOf(t, 'servicenow')),
  },
  {
    name: 'github',
    source: 'github',
    body: fixture('github-issues-opened.json'),
    headers: (t) => githubHeaders(fixture('github-issues-opened.json'), 'issues', 'gh-d-1', secretOf(t, 'github')),
  },
  {
    name: 'jira',
    source: 'jira',
    body: fixture('jira-issue-created.json'),
    headers: (t) => jiraHeaders(fixture('jira-issue-created.json'), secretOf(t, 'jira')),
  },
  {
    name: 'zendesk',
    source: 'zendesk',
    body: fixture('zendesk-ticket-status-changed.json'),
    headers: (t) => zendeskHeaders(fixture('zendesk-ticket-status-changed.json'), undefined, secretOf(t, 'zendesk')),
  },
];

describe('feeds of several tenants', () => {
  for (const d of deliveries) {
    it(`${d.name}: each tenant's secret verifies and tags its own tenant; the same event of both is published for both`, async () => {
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

  for (const d of deliveries) {
    it(`${d.name}: a tenant with two secrets (rotation) is tagged by either; the other tenant stays apart`, async () => {
      // ta rotates: its old and its new secret at once, beside tb's one.
      const rotating = [...pairs(d.source), { tenant: 'ta', secret: secretOf('ta-new', d.source) }];
      const { app, publisher } = await feedApp({ secrets: { [d.source]: rotating } });
      const post = (signer: string) =>
        app.inject({ method: 'POST', url: `/feeds/${d.source}`, headers: d.headers(signer), payload: d.body });
      const old = await post('ta');
      const next = await post('ta-new');
      const other = await post('tb');
      expect([old.statusCode, next.statusCode, other.statusCode]).toEqual([202, 202, 202]);
      // The same delivery signed with either of ta's secrets is ta's, so its copy is a duplicate.
      expect(old.json().duplicate).toBeUndefined();
      expect(next.json()).toEqual({ accepted: true, id: old.json().id, duplicate: true });
      expect(other.json().duplicate).toBeUndefined();
      expect(publisher.published.map((p) => JSON.parse(p.record.value).tenant)).toEqual(['ta', 'tb']);
      await app.close();
    });
  }

  it('a tenant with two secrets (rotation) is tagged by either', async () => {
    const { app, publisher } = await feedApp({
      secrets: { generic: [...pairs('generic'), { tenant: 'ta', secret: 'ta-rotated' }] },
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
