import { DEFAULT_TENANT, type TicketUpdate, ticketKey } from '@ctxflow/contracts';
import { FeedStepContext, MemoryFeedStreams, StepContextService } from '@ctxflow/step-context';
import { MemorySubscriptionStore } from '@ctxflow/subscriptions';
import { describe, expect, it } from 'vitest';
import { createHarness } from '../../../../test/support/harness.ts';
import { renderNotice } from '../../src/domain/render-notice.ts';
import { makeUpdate } from '../helpers.ts';

/**
 * The feed as the session-runner's stepContext source, through the runner's
 * HTTP API (the webhook leg is feed-ingestor's; here updates enter as bus
 * records): issue 3's end-to-end expectations short of the signed webhook.
 */
async function setup() {
  const subscriptions = new MemorySubscriptionStore();
  const feedStreams = new MemoryFeedStreams({ subscriptions });
  const feed = new FeedStepContext({ feedStreams, subscriptions });
  const service = new StepContextService({
    subscriber: {
      subscribe: async () => {
        throw new Error('unused');
      },
    },
    feedStreams,
    subscriptions,
  });
  const harness = await createHarness({ engine: { stepContextFor: () => feed } });
  let offset = 0;
  const deliver = async (...updates: TicketUpdate[]) =>
    service.handle(
      updates.map((u) => ({
        topic: 'ctxflow.ticket-updates.v1',
        partition: 0,
        offset: String(offset++),
        key: ticketKey(u),
        value: JSON.stringify(u),
        headers: {},
      })),
    );
  const session = async () => (await harness.call('POST', '/sessions', {})).body.sessionId as string;
  const step = async (sessionId: string) => {
    const res = await harness.call('POST', `/sessions/${sessionId}/steps`, {});
    expect(res.status).toBe(200);
    return res.body as {
      rows: { kind: string; source: string; content: string; cursor?: unknown; ticketUpdates?: unknown }[];
      cursor: unknown;
    };
  };
  return { harness, subscriptions, deliver, session, step };
}

/** The feed's cursor: a position per source. */
const at = (source: string, seq: number) => ({ v: 2, p: { [source]: seq } });

describe('ticket feed into sessions through the runner', () => {
  it('one notice row per update, source hook, with a cursor; nothing twice; coalesced; stale dropped; only subscribers', async () => {
    const { subscriptions, deliver, session, step } = await setup();
    const [s, other] = [await session(), await session()];
    await subscriptions.subscribe(DEFAULT_TENANT, s, { source: 'zendesk', ticket: '*', scope: '1001' });
    await step(s);

    const u1 = makeUpdate({
      source: 'zendesk',
      ticket: '35436',
      scope: '1001',
      version: 2,
      summary: 'Printer on fire',
    });
    await deliver(u1);
    const first = await step(s);
    expect(first.rows).toEqual([
      {
        id: expect.any(String),
        role: 'context',
        kind: 'notice',
        source: 'hook',
        content: renderNotice([u1]),
        cursor: at('zendesk', 1),
        ticketUpdates: [{ source: 'zendesk', eventId: u1.eventId }],
      },
    ]);
    expect(first.cursor).toEqual(at('zendesk', 1));
    expect((await step(s)).rows).toEqual([]); // the next step adds nothing
    await deliver(u1); // the same delivery again
    expect((await step(s)).rows).toEqual([]);

    const u2 = makeUpdate({
      source: 'zendesk',
      ticket: '35436',
      scope: '1001',
      version: 3,
      kind: 'status',
      summary: 'Status changed',
      changes: [{ field: 'status', from: 'open', to: 'pending' }],
    });
    const u3 = makeUpdate({ source: 'zendesk', ticket: '35436', scope: '1001', version: 4, summary: 'Fire is out' });
    await deliver(u2, u3);
    const coalesced = await step(s);
    expect(coalesced.rows.map((r) => [r.content, r.cursor])).toEqual([[renderNotice([u2, u3]), at('zendesk', 3)]]);
    expect(coalesced.rows[0]!.content).toContain('- "status": "open" -> "pending"');
    // The coalesced row names both updates it carried, in order.
    expect(coalesced.rows[0]!.ticketUpdates).toEqual([
      { source: 'zendesk', eventId: u2.eventId },
      { source: 'zendesk', eventId: u3.eventId },
    ]);

    await deliver(makeUpdate({ source: 'zendesk', ticket: '35436', scope: '1001', version: 1, summary: 'old news' }));
    expect((await step(s)).rows).toEqual([]); // an older version after a newer one adds nothing
    expect((await step(other)).rows).toEqual([]); // not subscribed: nothing
  });

  it('a branch keeps its source position and follows the same tickets', async () => {
    const { harness, subscriptions, deliver, session, step } = await setup();
    const s = await session();
    await subscriptions.subscribe(DEFAULT_TENANT, s, { source: 'jira', ticket: 'PROJ-7' });
    const u1 = makeUpdate({ source: 'jira', ticket: 'PROJ-7', scope: 'PROJ' });
    await deliver(u1);
    expect((await step(s)).rows).toHaveLength(1);
    const branch = (await harness.call('POST', `/sessions/${s}/branches`, {})).body.sessionId as string;
    expect((await step(branch)).rows).toEqual([]); // u1 already reached the copied log
    const u2 = makeUpdate({ source: 'jira', ticket: 'PROJ-7', scope: 'PROJ' });
    await deliver(u2);
    expect((await step(branch)).rows.map((r) => [r.content, r.cursor])).toEqual([[renderNotice([u2]), at('jira', 2)]]);
    expect((await step(s)).rows.map((r) => [r.content, r.cursor])).toEqual([[renderNotice([u2]), at('jira', 2)]]);
  });
});
