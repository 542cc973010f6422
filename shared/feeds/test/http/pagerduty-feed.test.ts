/**
 * `POST /feeds/pagerduty`: PagerDuty's own documented v3 payloads (shared/feeds/test/fixtures/SOURCES.md),
 * signed here as PagerDuty signs them, each to its exact TicketUpdate; refusals, ignored
 * events and duplicates publish nothing.
 */
import { type TicketUpdate, TOPICS } from '@ctxflow/contracts';
import { describe, expect, it } from 'vitest';
import { feedApp, fixture, pagerdutyHeaders, RECEIVED_AT, SECRETS } from '../helpers.ts';

const priority = fixture('pagerduty-incident-priority-updated.json');
const service = fixture('pagerduty-service-updated.json');
/** The body with its event type replaced (one occurrence: `event.event_type`). */
const retype = (body: Buffer, from: string, to: string) =>
  Buffer.from(body.toString('utf8').replace(JSON.stringify(from), JSON.stringify(to)));
const withType = (body: Buffer, type: string) => retype(body, 'incident.priority_updated', type);

async function post(body: Buffer | string, headers: Record<string, string>, app?: Awaited<ReturnType<typeof feedApp>>) {
  const feed = app ?? (await feedApp());
  const res = await feed.app.inject({ method: 'POST', url: '/feeds/pagerduty', headers, payload: body });
  return { res, ...feed };
}

const incidentLines =
  'status: triggered\nurgency: high\npriority: P1\nservice: API Service\nescalation policy: Default\nassignees: User 123';
const incident = {
  source: 'pagerduty',
  ticket: 'PGR0VU2',
  author: 'Tenex Engineer',
  title: 'A little bump in the road',
  url: 'https://acme.pagerduty.com/incidents/PGR0VU2',
  receivedAt: RECEIVED_AT,
} as const;

const cases: { name: string; body: Buffer; webhookId?: string; expected: TicketUpdate }[] = [
  {
    name: 'incident.priority_updated (the documented example), delivery id from X-Webhook-Id',
    body: priority,
    webhookId: 'a5d1c3e4-7c0a-4c84-9f6e-2e0c7f7a2b11',
    expected: {
      ...incident,
      id: 'pagerduty:a5d1c3e4-7c0a-4c84-9f6e-2e0c7f7a2b11',
      eventId: 'a5d1c3e4-7c0a-4c84-9f6e-2e0c7f7a2b11',
      kind: 'priority_updated',
      summary: `Tenex Engineer changed the priority of incident #2 PGR0VU2: A little bump in the road\n${incidentLines}`,
      occurredAt: '2020-10-02T18:45:22.169Z',
    },
  },
  {
    name: 'incident.triggered, delivery id from event.id without X-Webhook-Id',
    body: withType(priority, 'incident.triggered'),
    expected: {
      ...incident,
      id: 'pagerduty:5ac64822-4adc-4fda-ade0-410becf0de4f',
      eventId: '5ac64822-4adc-4fda-ade0-410becf0de4f',
      kind: 'created',
      summary: `Tenex Engineer triggered incident #2 PGR0VU2: A little bump in the road\n${incidentLines}`,
      occurredAt: '2020-10-02T18:45:22.169Z',
    },
  },
  {
    name: 'incident.annotated: the note, on the incident it names',
    body: fixture('pagerduty-incident-annotated.json'),
    expected: {
      ...incident,
      id: 'pagerduty:01DA2MLYN0J5EFC1LKWXUKDDKT',
      eventId: '01DA2MLYN0J5EFC1LKWXUKDDKT',
      kind: 'commented',
      summary: 'Tenex Engineer added a note to incident PGR0VU2: I sure am glad we are using PagerDuty!',
      occurredAt: '2020-10-02T18:50:02.112Z',
    },
  },
  {
    name: 'incident.status_update_published',
    body: fixture('pagerduty-incident-status-update-published.json'),
    expected: {
      ...incident,
      id: 'pagerduty:01DA2MN3ZB1QZH1F4ZJ2XSX3W4',
      eventId: '01DA2MN3ZB1QZH1F4ZJ2XSX3W4',
      kind: 'status_update_published',
      summary:
        'Tenex Engineer published a status update on incident PGR0VU2: A fix for this incident is being developed',
      occurredAt: '2020-10-02T18:55:40.004Z',
    },
  },
  {
    name: 'incident.responder.added',
    body: fixture('pagerduty-incident-responder-added.json'),
    expected: {
      ...incident,
      id: 'pagerduty:01DA2MP8D2PW6S5C5QJ4V2K0QX',
      eventId: '01DA2MP8D2PW6S5C5QJ4V2K0QX',
      kind: 'responder_added',
      summary: 'Tenex Engineer asked Maeve to respond to incident PGR0VU2: Please help me make the tests pass',
      occurredAt: '2020-10-02T18:47:10.530Z',
    },
  },
  {
    name: 'incident.workflow.started: ticket from data.incident.id',
    body: fixture('pagerduty-workflow-started.json'),
    expected: {
      source: 'pagerduty',
      ticket: 'PBAZLIU',
      id: 'pagerduty:unique_event_id',
      eventId: 'unique_event_id',
      kind: 'workflow_started',
      summary: 'Workflow A Workflow Name started on incident PBAZLIU',
      title: 'A little bump in the road',
      url: 'https://acme.pagerduty.com/incidents/PBAZLIU',
      author: 'User 22',
      occurredAt: '2023-01-05T19:35:03.642Z',
      receivedAt: RECEIVED_AT,
    },
  },
];

describe('POST /feeds/pagerduty', () => {
  for (const c of cases) {
    it(`${c.name} -> 202, published once as the exact TicketUpdate`, async () => {
      const { res, app, publisher } = await post(c.body, pagerdutyHeaders(c.body, c.webhookId));
      expect(res.statusCode).toBe(202);
      expect(res.json()).toEqual({ accepted: true, id: c.expected.id });
      expect(publisher.published).toHaveLength(1);
      const [{ topic, record }] = publisher.published as [(typeof publisher.published)[number]];
      expect(topic).toBe(TOPICS.ticketUpdates);
      expect(record.key).toBe(`pagerduty:${c.expected.ticket}`);
      expect(record.headers).toEqual({ 'ctxflow-record-id': c.expected.id });
      expect(JSON.parse(record.value)).toEqual({ ...c.expected, tenant: 'default' });
      await app.close();
    });
  }

  it('every event type the feed takes publishes one update of its incident', async () => {
    const types = [
      'incident.triggered',
      'incident.acknowledged',
      'incident.unacknowledged',
      'incident.resolved',
      'incident.reopened',
      'incident.reassigned',
      'incident.escalated',
      'incident.delegated',
      'incident.priority_updated',
    ];
    const feed = await feedApp();
    for (const [i, type] of types.entries()) {
      const body = withType(priority, type);
      const { res } = await post(body, pagerdutyHeaders(body, `wh-${i}`), feed);
      expect(res.statusCode, type).toBe(202);
    }
    const published = feed.publisher.published.map((p) => JSON.parse(p.record.value));
    expect(published.map((u) => [u.ticket, u.kind])).toEqual([
      ['PGR0VU2', 'created'],
      ['PGR0VU2', 'acknowledged'],
      ['PGR0VU2', 'unacknowledged'],
      ['PGR0VU2', 'resolved'],
      ['PGR0VU2', 'reopened'],
      ['PGR0VU2', 'reassigned'],
      ['PGR0VU2', 'escalated'],
      ['PGR0VU2', 'delegated'],
      ['PGR0VU2', 'priority_updated'],
    ]);
    await feed.app.close();
  });

  it('a signature listed beside another (PagerDuty rotating its secret) verifies, in either place', async () => {
    const feed = await feedApp();
    const first = await post(priority, pagerdutyHeaders(priority, 'rot-1', ['old-secret', SECRETS.pagerduty]), feed);
    const second = await post(priority, pagerdutyHeaders(priority, 'rot-2', [SECRETS.pagerduty, 'new-secret']), feed);
    expect([first.res.statusCode, second.res.statusCode]).toEqual([202, 202]);
    expect(feed.publisher.published).toHaveLength(2);
    await feed.app.close();
  });

  it('either of two configured secrets verifies', async () => {
    const feed = await feedApp({
      secrets: {
        pagerduty: [
          { tenant: 'default', secret: 'retiring' },
          { tenant: 'default', secret: 'current' },
        ],
      },
    });
    const a = await post(priority, pagerdutyHeaders(priority, 'two-1', ['retiring']), feed);
    const b = await post(priority, pagerdutyHeaders(priority, 'two-2', ['current']), feed);
    expect([a.res.statusCode, b.res.statusCode]).toEqual([202, 202]);
    expect(feed.publisher.published).toHaveLength(2);
    await feed.app.close();
  });

  it('a redelivery (same X-Webhook-Id) -> 202 duplicate, published once', async () => {
    const feed = await feedApp();
    const headers = pagerdutyHeaders(priority, 'redelivered-1');
    const first = await post(priority, headers, feed);
    const second = await post(priority, headers, feed);
    expect(first.res.json()).toEqual({ accepted: true, id: 'pagerduty:redelivered-1' });
    expect(second.res.statusCode).toBe(202);
    expect(second.res.json()).toEqual({ accepted: true, id: 'pagerduty:redelivered-1', duplicate: true });
    expect(feed.publisher.published).toHaveLength(1);
    await feed.app.close();
  });

  for (const [name, body] of [
    ['service.updated (an event about no incident)', service],
    ['service.created', retype(service, 'service.updated', 'service.created')],
    ['service.deleted', retype(service, 'service.updated', 'service.deleted')],
    ['an incident event type the feed does not take', withType(priority, 'incident.conference_bridge.updated')],
  ] as const) {
    it(`${name} -> 202 { ignored: true }, nothing published`, async () => {
      const { res, app, publisher } = await post(body, pagerdutyHeaders(body, 'ignored-1'));
      expect(res.statusCode).toBe(202);
      expect(res.json()).toEqual({ ignored: true });
      expect(publisher.published).toEqual([]);
      await app.close();
    });
  }

  const sig = (body: Buffer, secret = SECRETS.pagerduty) => pagerdutyHeaders(body, 'r-1', [secret]);
  for (const [name, body, headers] of [
    ['a tampered body', Buffer.from(priority.toString().replace('P1', 'P5')), sig(priority)],
    ['a signature of another secret', priority, sig(priority, 'not-the-secret')],
    ['no signature header', priority, { 'content-type': 'application/json' }],
    [
      'a signature of the wrong length',
      priority,
      { 'content-type': 'application/json', 'x-pagerduty-signature': 'v1=abcd' },
    ],
    [
      'a v0 signature only',
      priority,
      { 'content-type': 'application/json', 'x-pagerduty-signature': `v0=${'0'.repeat(64)}` },
    ],
    [
      'nine signatures',
      priority,
      {
        'content-type': 'application/json',
        'x-pagerduty-signature': Array(9).fill(sig(priority)['x-pagerduty-signature']).join(','),
      },
    ],
  ] as const) {
    it(`${name} -> 401 unauthorized, nothing published`, async () => {
      const { res, app, publisher } = await post(body, headers as Record<string, string>);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: { code: 'unauthorized', message: expect.any(String), retryable: false } });
      expect(publisher.published).toEqual([]);
      await app.close();
    });
  }

  it('a signed body that is not a v3 event -> 400 naming the path, nothing published', async () => {
    const body = JSON.stringify({ messages: [{ event: 'incident.trigger' }] });
    const { res, app, publisher } = await post(body, pagerdutyHeaders(body, 'v2-1'));
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({
      code: 'validation_error',
      message: expect.stringMatching(/^pagerduty payload: event: /),
    });
    expect(publisher.published).toEqual([]);
    await app.close();
  });
});
