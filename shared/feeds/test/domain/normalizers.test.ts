import { type TicketUpdate, TOPICS } from '@ctxflow/contracts';
import { describe, expect, it } from 'vitest';
import {
  feedApp,
  fixture,
  genericHeaders,
  githubHeaders,
  jiraHeaders,
  RECEIVED_AT,
  zendeskHeaders,
} from '../helpers.ts';

const GH_DELIVERY = '72d3162e-cc78-11e3-81ab-4c9367dc0958';

interface Case {
  name: string;
  source: string;
  body: Buffer;
  headers: Record<string, string>;
  expected: TicketUpdate;
}

const cases: Case[] = [
  {
    name: 'generic: the documented body',
    source: 'generic',
    body: fixture('generic-update.json'),
    headers: genericHeaders(fixture('generic-update.json')),
    expected: {
      id: 'generic:evt-2024-05-01-0001',
      source: 'generic',
      ticket: 'OPS-42',
      eventId: 'evt-2024-05-01-0001',
      kind: 'status',
      summary: 'Customer reports checkout timeouts again since 09:10 UTC; rollback of release 7.3 is under way.',
      title: 'Checkout timeouts in EU region',
      url: 'https://tickets.example.com/OPS-42',
      version: 17,
      occurredAt: '2024-05-01T09:14:00Z',
      receivedAt: RECEIVED_AT,
    },
  },
  {
    name: 'github: issues opened',
    source: 'github',
    body: fixture('github-issues-opened.json'),
    headers: githubHeaders(fixture('github-issues-opened.json'), 'issues', GH_DELIVERY),
    expected: {
      id: `github:${GH_DELIVERY}`,
      source: 'github',
      ticket: 'Codertocat/Hello-World#1',
      scope: 'Codertocat/Hello-World',
      eventId: GH_DELIVERY,
      kind: 'created',
      summary:
        "Codertocat opened issue Codertocat/Hello-World#1: Spelling error in the README file\n\nIt looks like you accidently spelled 'commit' with two 't's.",
      title: 'Spelling error in the README file',
      url: 'https://github.com/Codertocat/Hello-World/issues/1',
      author: 'Codertocat',
      occurredAt: '2019-05-15T15:20:18Z',
      receivedAt: RECEIVED_AT,
    },
  },
  {
    name: 'github: issues closed',
    source: 'github',
    body: fixture('github-issues-closed.json'),
    headers: githubHeaders(fixture('github-issues-closed.json'), 'issues', `${GH_DELIVERY}-closed`),
    expected: {
      id: `github:${GH_DELIVERY}-closed`,
      source: 'github',
      ticket: 'Codertocat/Hello-World#1',
      scope: 'Codertocat/Hello-World',
      eventId: `${GH_DELIVERY}-closed`,
      kind: 'status',
      summary: 'Codertocat closed issue Codertocat/Hello-World#1: Spelling error in the README file',
      title: 'Spelling error in the README file',
      url: 'https://github.com/Codertocat/Hello-World/issues/1',
      author: 'Codertocat',
      occurredAt: '2019-05-15T15:22:02Z',
      changes: [{ field: 'state', from: 'open', to: 'closed' }],
      receivedAt: RECEIVED_AT,
    },
  },
  {
    name: 'github: issue_comment created',
    source: 'github',
    body: fixture('github-issue-comment-created.json'),
    headers: githubHeaders(fixture('github-issue-comment-created.json'), 'issue_comment', `${GH_DELIVERY}-c`),
    expected: {
      id: `github:${GH_DELIVERY}-c`,
      source: 'github',
      ticket: 'Codertocat/Hello-World#1',
      scope: 'Codertocat/Hello-World',
      eventId: `${GH_DELIVERY}-c`,
      kind: 'commented',
      summary:
        "Codertocat commented on Codertocat/Hello-World#1: You are totally right! I'll get this fixed right away.",
      title: 'Spelling error in the README file',
      url: 'https://github.com/Codertocat/Hello-World/issues/1#issuecomment-492700400',
      author: 'Codertocat',
      occurredAt: '2019-05-15T15:20:21Z',
      receivedAt: RECEIVED_AT,
    },
  },
  {
    name: 'jira: jira:issue_created',
    source: 'jira',
    body: fixture('jira-issue-created.json'),
    headers: jiraHeaders(fixture('jira-issue-created.json')),
    expected: {
      id: 'jira:jira:issue_created:10002:1714554840000',
      source: 'jira',
      ticket: 'PROJ-123',
      scope: 'PROJ',
      eventId: 'jira:issue_created:10002:1714554840000',
      kind: 'created',
      summary:
        'Mia Krystof created PROJ-123: Payment page returns 502 for EU cards\n\nSince the 7.3 release, EU card payments fail with a 502 at the confirmation step.',
      title: 'Payment page returns 502 for EU cards',
      url: 'https://your-domain.atlassian.net/browse/PROJ-123',
      author: 'Mia Krystof',
      version: 1714554840000,
      occurredAt: '2024-05-01T09:14:00.000Z',
      receivedAt: RECEIVED_AT,
    },
  },
  {
    name: 'jira: jira:issue_updated with changelog, delivery id from X-Atlassian-Webhook-Identifier',
    source: 'jira',
    body: fixture('jira-issue-updated.json'),
    headers: { ...jiraHeaders(fixture('jira-issue-updated.json')), 'x-atlassian-webhook-identifier': '3f6d2a71-upd' },
    expected: {
      id: 'jira:3f6d2a71-upd',
      source: 'jira',
      ticket: 'PROJ-123',
      scope: 'PROJ',
      eventId: '3f6d2a71-upd',
      kind: 'updated',
      summary:
        'Bryan Rollins updated PROJ-123: Payment page returns 502 for EU cards\n- status: "To Do" -> "In Progress"\n- priority: "High" -> "Highest"\n- assignee: none -> "Bryan Rollins"',
      title: 'Payment page returns 502 for EU cards',
      url: 'https://your-domain.atlassian.net/browse/PROJ-123',
      author: 'Bryan Rollins',
      version: 1714555500123,
      occurredAt: '2024-05-01T09:25:00.123Z',
      changes: [
        { field: 'status', from: 'To Do', to: 'In Progress' },
        { field: 'priority', from: 'High', to: 'Highest' },
        { field: 'assignee', from: null, to: 'Bryan Rollins' },
      ],
      receivedAt: RECEIVED_AT,
    },
  },
  {
    name: 'jira: comment_created',
    source: 'jira',
    body: fixture('jira-comment-created.json'),
    headers: jiraHeaders(fixture('jira-comment-created.json')),
    expected: {
      id: 'jira:comment_created:10002:1714555800456',
      source: 'jira',
      ticket: 'PROJ-123',
      scope: 'PROJ',
      eventId: 'comment_created:10002:1714555800456',
      kind: 'commented',
      summary: 'Bryan Rollins commented on PROJ-123: Rolled back 7.3 on eu-west-1; error rate is back to baseline.',
      title: 'Payment page returns 502 for EU cards',
      url: 'https://your-domain.atlassian.net/browse/PROJ-123',
      author: 'Bryan Rollins',
      version: 1714555800456,
      occurredAt: '2024-05-01T09:30:00.456Z',
      receivedAt: RECEIVED_AT,
    },
  },
  {
    name: 'zendesk: ticket.status_changed',
    source: 'zendesk',
    body: fixture('zendesk-ticket-status-changed.json'),
    headers: zendeskHeaders(fixture('zendesk-ticket-status-changed.json')),
    expected: {
      id: 'zendesk:a8b9c1d2-3e4f-5a6b-7c8d-9e0f1a2b3c4d',
      source: 'zendesk',
      ticket: '5158',
      scope: '22129848',
      eventId: 'a8b9c1d2-3e4f-5a6b-7c8d-9e0f1a2b3c4d',
      kind: 'status',
      summary: 'Ticket 5158 status changed: "OPEN" -> "SOLVED"',
      title: 'Cannot login to mobile app',
      occurredAt: '2025-01-08T16:45:20.987654321Z',
      changes: [{ field: 'status', from: 'OPEN', to: 'SOLVED' }],
      receivedAt: RECEIVED_AT,
    },
  },
  {
    name: 'zendesk: ticket.comment_added',
    source: 'zendesk',
    body: fixture('zendesk-ticket-comment-added.json'),
    headers: zendeskHeaders(fixture('zendesk-ticket-comment-added.json')),
    expected: {
      id: 'zendesk:d4f5c389-8f4a-4c2e-a1b9-8e4f39c71d52',
      source: 'zendesk',
      ticket: '5158',
      scope: '22129848',
      eventId: 'd4f5c389-8f4a-4c2e-a1b9-8e4f39c71d52',
      kind: 'commented',
      summary: 'Support Agent commented on ticket 5158: We are investigating this issue and will update you shortly.',
      title: 'Cannot login to mobile app',
      author: 'Support Agent',
      occurredAt: '2025-01-08T14:25:30.123456789Z',
      receivedAt: RECEIVED_AT,
    },
  },
];

describe('feed fixtures normalize to one TicketUpdate each', () => {
  for (const c of cases) {
    it(`${c.name} -> 202, published once as the exact TicketUpdate`, async () => {
      const { app, publisher } = await feedApp();
      const res = await app.inject({ method: 'POST', url: `/feeds/${c.source}`, headers: c.headers, payload: c.body });
      expect(res.statusCode).toBe(202);
      expect(res.json()).toEqual({ accepted: true, id: c.expected.id });
      expect(publisher.published).toHaveLength(1);
      const [{ topic, record }] = publisher.published as [(typeof publisher.published)[number]];
      expect(topic).toBe(TOPICS.ticketUpdates);
      expect(record.key).toBe(`${c.expected.source}:${c.expected.ticket}`);
      expect(record.headers).toEqual({ 'ctxflow-record-id': c.expected.id });
      // A single-tenant feed (a plain secret) tags the default tenant.
      expect(JSON.parse(record.value)).toEqual({ ...c.expected, tenant: 'default' });
      await app.close();
    });
  }

  const ignored = [
    {
      name: 'github ping',
      source: 'github',
      headers: githubHeaders(fixture('github-ping.json'), 'ping', 'ping-1'),
      body: fixture('github-ping.json'),
    },
    {
      name: 'zendesk user event',
      source: 'zendesk',
      headers: zendeskHeaders(fixture('zendesk-user-active-changed.json')),
      body: fixture('zendesk-user-active-changed.json'),
    },
  ];
  for (const c of ignored) {
    it(`${c.name}: an event the feed does not carry -> 202 { ignored: true }, nothing published`, async () => {
      const { app, publisher } = await feedApp();
      const res = await app.inject({ method: 'POST', url: `/feeds/${c.source}`, headers: c.headers, payload: c.body });
      expect(res.statusCode).toBe(202);
      expect(res.json()).toEqual({ ignored: true });
      expect(publisher.published).toEqual([]);
      await app.close();
    });
  }
});
