/**
 * `POST /feeds/gitlab`: GitLab's own documented `Issue Hook` and `Note Hook` payloads
 * (shared/feeds/test/fixtures/SOURCES.md) with the token GitLab sends, each to its exact TicketUpdate;
 * work item types and confidential hooks; refusals, ignored events and duplicates publish
 * nothing.
 */
import { type TicketUpdate, TOPICS } from '@ctxflow/contracts';
import { describe, expect, it } from 'vitest';
import { feedApp, fixture, gitlabHeaders, RECEIVED_AT, SECRETS } from '../helpers.ts';

const issueHook = fixture('gitlab-issue-hook.json');
const noteOnIssue = fixture('gitlab-note-issue.json');
const noteOnMergeRequest = fixture('gitlab-note-merge-request.json');

function variant(body: Buffer, change: (payload: Record<string, any>) => void): Buffer {
  const payload = JSON.parse(body.toString('utf8'));
  change(payload);
  return Buffer.from(JSON.stringify(payload));
}

async function post(
  body: Buffer | string,
  headers: Record<string, string>,
  feed?: Awaited<ReturnType<typeof feedApp>>,
) {
  const app = feed ?? (await feedApp());
  const res = await app.app.inject({ method: 'POST', url: '/feeds/gitlab', headers, payload: body });
  return { res, ...app };
}

const issue23 = {
  source: 'gitlab',
  ticket: 'gitlabhq/gitlab-test#23',
  scope: 'gitlabhq/gitlab-test',
  title: 'New API: create/update/delete file',
  url: 'http://example.com/diaspora/issues/23',
  author: 'root',
  occurredAt: '2013-12-03T17:15:43.000Z',
  receivedAt: RECEIVED_AT,
} as const;

const cases: { name: string; event: string; body: Buffer; key?: string; expected: TicketUpdate }[] = [
  {
    name: "Issue Hook, action open (GitLab's documented example), the id from Idempotency-Key",
    event: 'Issue Hook',
    body: issueHook,
    key: 'a6b1f2c3-0d4e-4f5a-8b9c-0d1e2f3a4b5c',
    expected: {
      ...issue23,
      id: 'gitlab:a6b1f2c3-0d4e-4f5a-8b9c-0d1e2f3a4b5c',
      eventId: 'a6b1f2c3-0d4e-4f5a-8b9c-0d1e2f3a4b5c',
      kind: 'created',
      summary:
        'root opened issue gitlabhq/gitlab-test#23: New API: create/update/delete file\n\nCreate new API for manipulations with repository',
      changes: [{ field: 'labels', from: 'API', to: 'Platform' }],
    },
  },
  {
    name: 'Issue Hook, action update: the changed fields, without the bookkeeping ones; the id from X-Gitlab-Event-UUID',
    event: 'Issue Hook',
    body: variant(issueHook, (p) => {
      p.object_attributes.action = 'update';
    }),
    expected: {
      ...issue23,
      id: 'gitlab:13792a34-cac6-4fda-95a8-c58e00a3954e',
      eventId: '13792a34-cac6-4fda-95a8-c58e00a3954e',
      kind: 'updated',
      summary:
        'root updated issue gitlabhq/gitlab-test#23: New API: create/update/delete file\n- labels: "API" -> "Platform"',
      changes: [{ field: 'labels', from: 'API', to: 'Platform' }],
    },
  },
  {
    name: 'Confidential Issue Hook for an incident, action close',
    event: 'Confidential Issue Hook',
    key: 'k-close',
    body: variant(issueHook, (p) => {
      p.event_type = 'confidential_issue';
      p.object_attributes.action = 'close';
      p.object_attributes.type = 'Incident';
      p.object_attributes.state = 'closed';
      p.object_attributes.confidential = true;
      p.changes = {
        state_id: { previous: 1, current: 2 },
        closed_at: { previous: null, current: '2013-12-03 17:20:00 UTC' },
      };
    }),
    expected: {
      ...issue23,
      id: 'gitlab:k-close',
      eventId: 'k-close',
      kind: 'status',
      summary:
        'root closed incident gitlabhq/gitlab-test#23: New API: create/update/delete file\n- state: "opened" -> "closed"',
      changes: [{ field: 'state', from: 'opened', to: 'closed' }],
    },
  },
  {
    name: 'Issue Hook for a task (object_kind work_item), action reopen',
    event: 'Issue Hook',
    key: 'k-reopen',
    body: variant(issueHook, (p) => {
      p.object_kind = 'work_item';
      p.event_type = 'work_item';
      p.object_attributes.action = 'reopen';
      p.object_attributes.type = 'Task';
      delete p.changes;
    }),
    expected: {
      ...issue23,
      id: 'gitlab:k-reopen',
      eventId: 'k-reopen',
      kind: 'status',
      summary:
        'root reopened task gitlabhq/gitlab-test#23: New API: create/update/delete file\n- state: "closed" -> "opened"',
      changes: [{ field: 'state', from: 'closed', to: 'opened' }],
    },
  },
  {
    name: "Note Hook on an issue (GitLab's documented example)",
    event: 'Note Hook',
    key: 'k-note',
    body: noteOnIssue,
    expected: {
      id: 'gitlab:k-note',
      source: 'gitlab',
      ticket: 'gitlab-org/gitlab-test#17',
      scope: 'gitlab-org/gitlab-test',
      eventId: 'k-note',
      kind: 'commented',
      summary: 'root commented on gitlab-org/gitlab-test#17: Hello world',
      title: 'test',
      url: 'http://example.com/gitlab-org/gitlab-test/issues/17#note_1241',
      author: 'root',
      occurredAt: '2015-05-17T17:06:40.000Z',
      receivedAt: RECEIVED_AT,
    },
  },
  {
    name: 'Confidential Note Hook, an edited comment',
    event: 'Confidential Note Hook',
    key: 'k-note-edit',
    body: variant(noteOnIssue, (p) => {
      p.event_type = 'confidential_note';
      p.object_attributes.action = 'update';
    }),
    expected: {
      id: 'gitlab:k-note-edit',
      source: 'gitlab',
      ticket: 'gitlab-org/gitlab-test#17',
      scope: 'gitlab-org/gitlab-test',
      eventId: 'k-note-edit',
      kind: 'comment_edited',
      summary: 'root edited a comment on gitlab-org/gitlab-test#17: Hello world',
      title: 'test',
      url: 'http://example.com/gitlab-org/gitlab-test/issues/17#note_1241',
      author: 'root',
      occurredAt: '2015-05-17T17:06:40.000Z',
      receivedAt: RECEIVED_AT,
    },
  },
];

describe('POST /feeds/gitlab', () => {
  for (const c of cases) {
    it(`${c.name} -> 202, published once as the exact TicketUpdate`, async () => {
      const { res, app, publisher } = await post(c.body, gitlabHeaders(c.event, c.key));
      expect(res.statusCode).toBe(202);
      expect(res.json()).toEqual({ accepted: true, id: c.expected.id });
      expect(publisher.published).toHaveLength(1);
      const [{ topic, record }] = publisher.published as [(typeof publisher.published)[number]];
      expect(topic).toBe(TOPICS.ticketUpdates);
      expect(record.key).toBe(`gitlab:${c.expected.ticket}`);
      expect(JSON.parse(record.value)).toEqual({ ...c.expected, tenant: 'default' });
      await app.close();
    });
  }

  it('either of two configured tokens verifies (rotation)', async () => {
    const feed = await feedApp({
      secrets: {
        gitlab: [
          { tenant: 'default', secret: 'retiring-token' },
          { tenant: 'default', secret: 'current-token' },
        ],
      },
    });
    const a = await post(issueHook, gitlabHeaders('Issue Hook', 'rot-1', 'retiring-token'), feed);
    const b = await post(issueHook, gitlabHeaders('Issue Hook', 'rot-2', 'current-token'), feed);
    expect([a.res.statusCode, b.res.statusCode]).toEqual([202, 202]);
    expect(feed.publisher.published).toHaveLength(2);
    await feed.app.close();
  });

  it('a redelivery (same Idempotency-Key) -> 202 duplicate, published once', async () => {
    const feed = await feedApp();
    const headers = gitlabHeaders('Issue Hook', 'retried-1');
    const first = await post(issueHook, headers, feed);
    // GitLab keeps Idempotency-Key across retries; the event UUID may differ.
    const second = await post(issueHook, { ...headers, 'x-gitlab-event-uuid': 'another-uuid' }, feed);
    expect(first.res.statusCode).toBe(202);
    expect(second.res.json()).toEqual({ accepted: true, id: 'gitlab:retried-1', duplicate: true });
    expect(feed.publisher.published).toHaveLength(1);
    await feed.app.close();
  });

  for (const [name, event, body] of [
    ["a note on a merge request (GitLab's documented example)", 'Note Hook', noteOnMergeRequest],
    ['a note on a commit', 'Note Hook', variant(noteOnIssue, (p) => (p.object_attributes.noteable_type = 'Commit'))],
    [
      'a group-level work item (an epic: no project)',
      'Issue Hook',
      variant(issueHook, (p) => {
        p.object_kind = 'work_item';
        p.object_attributes.type = 'Epic';
        delete p.project;
      }),
    ],
    ['a Merge Request Hook', 'Merge Request Hook', issueHook],
    ['a Push Hook', 'Push Hook', issueHook],
  ] as const) {
    it(`${name} -> 202 { ignored: true }, nothing published`, async () => {
      const { res, app, publisher } = await post(body, gitlabHeaders(event, 'ignored'));
      expect(res.statusCode).toBe(202);
      expect(res.json()).toEqual({ ignored: true });
      expect(publisher.published).toEqual([]);
      await app.close();
    });
  }

  const headers = gitlabHeaders('Issue Hook', 'bad');
  for (const [name, sent] of [
    ['another token', { ...headers, 'x-gitlab-token': 'not-the-token' }],
    ['the token with one more character', { ...headers, 'x-gitlab-token': `${SECRETS.gitlab}x` }],
    ['the token less its last character', { ...headers, 'x-gitlab-token': SECRETS.gitlab.slice(0, -1) }],
    ['no token header', { 'content-type': 'application/json', 'x-gitlab-event': 'Issue Hook' }],
  ] as const) {
    it(`${name} -> 401 unauthorized, nothing published`, async () => {
      const { res, app, publisher } = await post(issueHook, sent as Record<string, string>);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: { code: 'unauthorized', message: expect.any(String), retryable: false } });
      expect(publisher.published).toEqual([]);
      await app.close();
    });
  }

  it('neither Idempotency-Key nor X-Gitlab-Event-UUID -> 400 naming them, nothing published', async () => {
    const { 'x-gitlab-event-uuid': _, ...rest } = gitlabHeaders('Issue Hook');
    const { res, app, publisher } = await post(issueHook, rest);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({
      code: 'validation_error',
      message: 'missing idempotency-key or x-gitlab-event-uuid header',
    });
    expect(publisher.published).toEqual([]);
    await app.close();
  });

  it('an Issue Hook without object_attributes.iid -> 400 naming the path, nothing published', async () => {
    const body = variant(issueHook, (p) => {
      delete p.object_attributes.iid;
    });
    const { res, app, publisher } = await post(body, gitlabHeaders('Issue Hook', 'no-iid'));
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/^gitlab issue payload: object_attributes\.iid: /);
    expect(publisher.published).toEqual([]);
    await app.close();
  });
});
