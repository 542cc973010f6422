/**
 * `POST /feeds/linear`: Linear's documented payload and an Issue update shaped as Linear
 * documents it (shared/feeds/test/fixtures/SOURCES.md), signed here as Linear signs them, each to its
 * exact TicketUpdate; the signed `webhookTimestamp` held to 60 s; refusals, ignored events
 * and duplicates publish nothing.
 */
import { type TicketUpdate, TOPICS } from '@ctxflow/contracts';
import { describe, expect, it } from 'vitest';
import { feedApp, linearBody, linearHeaders, NOW, RECEIVED_AT } from '../helpers.ts';

/** The delivery id of Linear's documented headers. */
const DELIVERY = '234d1a4e-b617-4388-90fe-adc3633d6b72';
const comment = linearBody('linear-comment-create.json');
const issue = linearBody('linear-issue-update.json');

/** The Issue fixture with `change` applied to its parsed body (re-serialized; the test signs what it sends). */
function issueWith(change: (body: Record<string, any>) => void): Buffer {
  const body = JSON.parse(issue.toString('utf8'));
  change(body);
  return Buffer.from(JSON.stringify(body));
}

async function post(
  body: Buffer | string,
  headers: Record<string, string>,
  feed?: Awaited<ReturnType<typeof feedApp>>,
) {
  const app = feed ?? (await feedApp());
  const res = await app.app.inject({ method: 'POST', url: '/feeds/linear', headers, payload: body });
  return { res, ...app };
}

const web43 = {
  source: 'linear',
  ticket: 'WEB-43',
  scope: 'WEB',
  title: 'Checkout fails for EU cards',
  url: 'https://linear.app/acme/issue/WEB-43/checkout-fails-for-eu-cards',
  author: 'Jane Doe',
  occurredAt: '2024-05-01T09:30:42.117Z',
  receivedAt: RECEIVED_AT,
} as const;

const cases: { name: string; body: Buffer; delivery?: string; expected: TicketUpdate }[] = [
  {
    name: "Comment create (Linear's documented example): the ticket from the URL, the id from Linear-Delivery",
    body: comment,
    delivery: DELIVERY,
    expected: {
      id: `linear:${DELIVERY}`,
      source: 'linear',
      ticket: 'LIN-1778',
      scope: 'LIN',
      eventId: DELIVERY,
      kind: 'commented',
      summary:
        'someone commented on LIN-1778: Indeed, I think this is definitely an improvement over the previous version.',
      url: 'https://linear.app/issue/LIN-1778/foo-bar#comment-77217de3-fb52-4dad-bb9a-b356beb93de8',
      occurredAt: '2020-01-23T12:53:18.084Z',
      receivedAt: RECEIVED_AT,
    },
  },
  {
    name: 'Issue update: what changed from updatedFrom; without Linear-Delivery the id is webhookId:webhookTimestamp',
    body: issue,
    expected: {
      ...web43,
      id: `linear:000042e3-d123-4980-b49f-8e140eef9329:${NOW}`,
      eventId: `000042e3-d123-4980-b49f-8e140eef9329:${NOW}`,
      kind: 'updated',
      summary: [
        'Jane Doe updated WEB-43: Checkout fails for EU cards',
        '- priority: "2" -> "1"',
        '- stateId: "8f3a2d9c-3b1e-4c55-a0e9-1d2f4b6c8a01" -> "0b5e8c1a-1f5c-4a57-9d6e-6a0c2f7d3e11" (now "In Progress")',
        '- assigneeId: none -> "aacdca22-6266-4c0a-ab3c-8fa70a26765c" (now "Jane Doe")',
      ].join('\n'),
      changes: [
        { field: 'priority', from: '2', to: '1' },
        {
          field: 'stateId',
          from: '8f3a2d9c-3b1e-4c55-a0e9-1d2f4b6c8a01',
          to: '0b5e8c1a-1f5c-4a57-9d6e-6a0c2f7d3e11',
        },
        { field: 'assigneeId', from: null, to: 'aacdca22-6266-4c0a-ab3c-8fa70a26765c' },
      ],
    },
  },
  {
    name: 'Issue create: the description follows the headline',
    body: issueWith((b) => {
      b.action = 'create';
      delete b.updatedFrom;
    }),
    delivery: 'd-create',
    expected: {
      ...web43,
      id: 'linear:d-create',
      eventId: 'd-create',
      kind: 'created',
      summary:
        'Jane Doe created WEB-43: Checkout fails for EU cards\n\nSince the 7.3 release, EU card payments fail at the confirmation step.',
    },
  },
  {
    name: 'Issue remove',
    body: issueWith((b) => {
      b.action = 'remove';
      delete b.updatedFrom;
    }),
    delivery: 'd-remove',
    expected: {
      ...web43,
      id: 'linear:d-remove',
      eventId: 'd-remove',
      kind: 'removed',
      summary: 'Jane Doe removed WEB-43: Checkout fails for EU cards',
    },
  },
];

describe('POST /feeds/linear', () => {
  for (const c of cases) {
    it(`${c.name} -> 202, published once as the exact TicketUpdate`, async () => {
      const { res, app, publisher } = await post(c.body, linearHeaders(c.body, c.delivery));
      expect(res.statusCode).toBe(202);
      expect(res.json()).toEqual({ accepted: true, id: c.expected.id });
      expect(publisher.published).toHaveLength(1);
      const [{ topic, record }] = publisher.published as [(typeof publisher.published)[number]];
      expect(topic).toBe(TOPICS.ticketUpdates);
      expect(record.key).toBe(`linear:${c.expected.ticket}`);
      expect(JSON.parse(record.value)).toEqual({ ...c.expected, tenant: 'default' });
      await app.close();
    });
  }

  it('the ticket: data.identifier, else team key and number, else the identifier in the URL', async () => {
    const feed = await feedApp();
    const bodies = [
      issueWith((b) => {
        delete b.data.identifier;
      }),
      issueWith((b) => {
        delete b.data.identifier;
        delete b.data.team;
      }),
      issueWith((b) => {
        b.data.identifier = 'OPS-7';
      }),
    ];
    for (const [i, body] of bodies.entries()) {
      expect((await post(body, linearHeaders(body, `t-${i}`), feed)).res.statusCode).toBe(202);
    }
    expect(feed.publisher.published.map((p) => JSON.parse(p.record.value).ticket)).toEqual([
      'WEB-43',
      'WEB-43',
      'OPS-7',
    ]);
    await feed.app.close();
  });

  it('an update changing only bookkeeping fields lists no changes', async () => {
    const body = issueWith((b) => {
      b.updatedFrom = { updatedAt: '2024-05-01T09:00:00.000Z', sortOrder: -12.5 };
    });
    const { res, app, publisher } = await post(body, linearHeaders(body, 'd-sort'));
    expect(res.statusCode).toBe(202);
    const update = JSON.parse(publisher.published[0]!.record.value);
    expect(update.changes).toBeUndefined();
    expect(update.summary).toBe('Jane Doe updated WEB-43: Checkout fails for EU cards');
    await app.close();
  });

  it('a redelivery (same Linear-Delivery) -> 202 duplicate, published once', async () => {
    const feed = await feedApp();
    const headers = linearHeaders(comment, DELIVERY);
    const first = await post(comment, headers, feed);
    const second = await post(comment, headers, feed);
    expect(first.res.statusCode).toBe(202);
    expect(second.res.json()).toEqual({ accepted: true, id: `linear:${DELIVERY}`, duplicate: true });
    expect(feed.publisher.published).toHaveLength(1);
    await feed.app.close();
  });

  it('without Linear-Delivery, the same webhookId and webhookTimestamp is the same delivery', async () => {
    const feed = await feedApp();
    await post(issue, linearHeaders(issue), feed);
    const again = await post(issue, linearHeaders(issue), feed);
    expect(again.res.json()).toMatchObject({ duplicate: true });
    expect(feed.publisher.published).toHaveLength(1);
    await feed.app.close();
  });

  for (const [name, body] of [
    ['a Project event', issueWith((b) => (b.type = 'Project'))],
    ['a Cycle event', issueWith((b) => (b.type = 'Cycle'))],
    ['a Reaction event', issueWith((b) => (b.type = 'Reaction'))],
    ['an Issue SLA event (action "breached")', issueWith((b) => (b.action = 'breached'))],
    [
      'an Issue that names no identifier anywhere',
      issueWith((b) => {
        delete b.data.identifier;
        delete b.data.team;
        delete b.data.url;
        delete b.url;
      }),
    ],
  ] as const) {
    it(`${name} -> 202 { ignored: true }, nothing published`, async () => {
      const { res, app, publisher } = await post(body, linearHeaders(body, 'ignored'));
      expect(res.statusCode).toBe(202);
      expect(res.json()).toEqual({ ignored: true });
      expect(publisher.published).toEqual([]);
      await app.close();
    });
  }

  const noTimestamp = issueWith((b) => {
    delete b.webhookTimestamp;
  });
  const stale = linearBody('linear-comment-create.json', NOW - 60_001);
  for (const [name, body, headers] of [
    ['a tampered body', Buffer.from(comment.toString().replace('Indeed', 'Indeeed')), linearHeaders(comment)],
    ['a signature of another secret', comment, linearHeaders(comment, undefined, 'not-the-secret')],
    ['no signature header', comment, { 'content-type': 'application/json' }],
    ['a signature of the wrong length', comment, { ...linearHeaders(comment), 'linear-signature': 'abcd' }],
    ['a webhookTimestamp 60.001 s old, correctly signed', stale, linearHeaders(stale)],
    [
      'a stale body with a fresh Linear-Timestamp header (the header is not signed)',
      stale,
      { ...linearHeaders(stale), 'linear-timestamp': String(NOW) },
    ],
    [
      'a webhookTimestamp 60.001 s ahead, correctly signed',
      linearBody('linear-comment-create.json', NOW + 60_001),
      linearHeaders(linearBody('linear-comment-create.json', NOW + 60_001)),
    ],
    ['no webhookTimestamp in the body, correctly signed', noTimestamp, linearHeaders(noTimestamp)],
  ] as const) {
    it(`${name} -> 401 unauthorized, nothing published`, async () => {
      const { res, app, publisher } = await post(body, headers as Record<string, string>);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: { code: 'unauthorized', message: expect.any(String), retryable: false } });
      expect(publisher.published).toEqual([]);
      await app.close();
    });
  }

  it('a webhookTimestamp exactly 60 s old is inside the window -> 202', async () => {
    const body = linearBody('linear-comment-create.json', NOW - 60_000);
    const { res, app, publisher } = await post(body, linearHeaders(body, 'edge'));
    expect(res.statusCode).toBe(202);
    expect(publisher.published).toHaveLength(1);
    await app.close();
  });

  it('a signed body that is not JSON -> 400 validation_error, nothing published', async () => {
    const body = '{"action": "create",';
    const { res, app, publisher } = await post(body, linearHeaders(body));
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('validation_error');
    expect(publisher.published).toEqual([]);
    await app.close();
  });

  for (const body of ['null', '[]', '"text"']) {
    it(`a signed ${body} body -> 400 validation_error, nothing published`, async () => {
      const { res, app, publisher } = await post(body, linearHeaders(body));
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({ code: 'validation_error', message: 'body: expected a JSON object' });
      expect(publisher.published).toEqual([]);
      await app.close();
    });
  }

  it('a comment without a body -> 400 naming the path, nothing published', async () => {
    const body = Buffer.from(comment.toString().replace('"body": ', '"bodyText": '));
    const { res, app, publisher } = await post(body, linearHeaders(body, 'no-body'));
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/^linear payload: data: body: /);
    expect(publisher.published).toEqual([]);
    await app.close();
  });
});
