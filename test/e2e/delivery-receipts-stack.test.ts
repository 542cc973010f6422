/**
 * Delivery receipts on the real stack (feed-ingestor, step-context and the session-runner as
 * their own processes on Kafka and Redis, two tenants): a signed generic update posted to the
 * feed-ingestor reaches tenant ta's subscribed session; the runner's
 * `GET /deliveries/generic/:eventId` then shows it accepted and published (the ledger the
 * feed-ingestor wrote), the session, the step that carried it, its row and request id;
 * tenant tb, whose session follows the same ticket, sees nothing of it.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../faults/processes.ts';
import { type Stack, startStack } from '../support/stack.ts';

const run = randomUUID().slice(0, 8);
const KEYS = { ta: 'receipts-key-a', tb: 'receipts-key-b' } as const;
type Tenant = keyof typeof KEYS;
const SECRET = `receipts-${run}`;

function signed(raw: string): Record<string, string> {
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = createHmac('sha256', SECRET).update(`${ts}.${raw}`).digest('hex');
  return { 'content-type': 'application/json', 'x-ctxflow-timestamp': ts, 'x-ctxflow-signature': `sha256=${sig}` };
}

describe('a delivery receipt on Kafka and Redis', () => {
  let stack: Stack<Tenant>;

  beforeAll(async () => {
    stack = await startStack({
      name: 'receipts',
      run,
      keys: KEYS,
      env: { CTXFLOW_FEED_SECRET_GENERIC: `ta:${SECRET}` },
      feedIngestor: true,
    });
  }, 120_000);

  afterAll(() => stack?.stop());

  it('accepted, published, then the session, step, row and request id of the step that carried it', async () => {
    const api = (tenant: Tenant, method: string, path: string, body?: object) => stack.api(tenant, method, path, body);
    const ticket = `T-${run}`;
    const ofA = (await api('ta', 'POST', '/sessions', {})).body.sessionId as string;
    const ofB = (await api('tb', 'POST', '/sessions', {})).body.sessionId as string;
    for (const [tenant, sessionId] of [
      ['ta', ofA],
      ['tb', ofB],
    ] as const) {
      expect(
        (await api(tenant, 'POST', `/sessions/${sessionId}/subscriptions`, { source: 'generic', ticket })).status,
      ).toBe(201);
    }
    const eventId = `evt-${run}`;
    const update = JSON.stringify({ eventId, ticket, summary: 'Customer replied: still broken' });
    const fed = await fetch(stack.feedUrl, { method: 'POST', headers: signed(update), body: update });
    expect(fed.status).toBe(202);
    expect(await api('ta', 'GET', `/deliveries/generic/${eventId}`)).toEqual({
      status: 200,
      body: { source: 'generic', eventId, accepted: true, published: true, sessions: [] },
    });

    // Steps (each its own request id) until one carries the update as a hook row.
    let round = 0;
    const carried = await waitFor(
      'a step that carries the update',
      async () => {
        const requestId = `req-${run}-${round++}`;
        const step = await api('ta', 'POST', `/sessions/${ofA}/steps`, { requestId });
        expect(step.status).toBe(200);
        return step.body.rows.length > 0 ? { requestId, step: step.body } : undefined;
      },
      30_000,
      200,
    );
    expect(carried.step.rows).toHaveLength(1);
    expect(carried.step.rows[0]).toMatchObject({ source: 'hook', kind: 'notice' });
    const receipt = await waitFor(
      'the receipt',
      async () => {
        const answer = await api('ta', 'GET', `/deliveries/generic/${eventId}`);
        return answer.body.sessions.length > 0 ? answer : undefined;
      },
      10_000,
    );
    expect(receipt).toEqual({
      status: 200,
      body: {
        source: 'generic',
        eventId,
        accepted: true,
        published: true,
        sessions: [
          {
            sessionId: ofA,
            stepId: carried.step.stepId,
            rowId: carried.step.rows[0].id,
            requestId: carried.requestId,
            at: expect.any(String),
          },
        ],
      },
    });

    // Tenant tb: its session got nothing, and the delivery is not its own.
    expect((await api('tb', 'POST', `/sessions/${ofB}/steps`, {})).body.rows).toEqual([]);
    expect((await api('tb', 'GET', `/deliveries/generic/${eventId}`)).body).toEqual({
      source: 'generic',
      eventId,
      accepted: false,
      published: false,
      sessions: [],
    });
  });
});
