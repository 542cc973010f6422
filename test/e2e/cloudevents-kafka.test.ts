/**
 * A foreign producer on the shared broker: a plain Kafka client (no ctxflow
 * code) writes CloudEvents in the Kafka protocol binding's binary mode
 * (`ce_*` headers, the data as the value) and structured mode
 * (`content-type: application/cloudevents+json`), a repeated event, a
 * TicketUpdate with a field this version does not know, another tenant's
 * event and a poison record onto the ticket-updates topic (under a fresh
 * KAFKA_TOPIC_PREFIX, so nobody else's topics are touched). step-context
 * consumes them; the subscribed session gets each update once.
 */
import { randomUUID } from 'node:crypto';
import { DEFAULT_TENANT, TOPICS } from '@ctxflow/contracts';
import { FeedStepContext, MemoryFeedStreams, StepContextService } from '@ctxflow/step-context';
import { MemorySubscriptionStore } from '@ctxflow/subscriptions';
import kafkajs from 'kafkajs';
import { afterAll, describe, expect, it } from 'vitest';
import { entriesOf } from '../../services/step-context/test/helpers.ts';
import { createHarness } from '../support/harness.ts';
import { requireKafka } from '../support/services.ts';
import { prefixedBus } from '../support/stack.ts';

const tag = randomUUID().slice(0, 8);
/** prefixedBus's topic prefix. */
const prefix = `ctxflow-test-ce-${tag}.`;
const topic = `${prefix}${TOPICS.ticketUpdates}`;
const JIRA = 'https://jira.example.com';
const cleanups: (() => Promise<void>)[] = [];

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** Binary mode: every attribute a `ce_` header, `content-type` the data's, the data the value. */
function binary(attributes: Record<string, string>, data: object, key = 'PROJ-7') {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  for (const [name, value] of Object.entries(attributes)) headers[`ce_${name}`] = value;
  return { key, value: JSON.stringify(data), headers };
}

describe('CloudEvents Kafka binding: a foreign producer feeds a session with no glue', () => {
  it('binary and structured records reach the session once; a duplicate id is dropped; an extra field is kept', async () => {
    const { bus, close } = await prefixedBus('ce', tag, [TOPICS.ticketUpdates]);
    cleanups.push(close);
    const subscriptions = new MemorySubscriptionStore();
    const feedStreams = new MemoryFeedStreams({ subscriptions });
    const service = new StepContextService({
      subscriber: bus.subscriber,
      feedStreams,
      subscriptions,
      groupId: `ctxflow-test-ce-step-context-${tag}`,
    });
    await service.start();
    cleanups.push(() => service.stop());
    const feed = new FeedStepContext({ feedStreams, subscriptions });
    const harness = await createHarness({ engine: { stepContextFor: () => feed } });
    const session = (await harness.call('POST', '/sessions', {})).body.sessionId as string;
    await subscriptions.subscribe(DEFAULT_TENANT, session, { source: 'cloudevents', ticket: 'PROJ-7' });
    await subscriptions.subscribe(DEFAULT_TENANT, session, { source: 'generic', ticket: 'T-9' });
    expect((await harness.call('POST', `/sessions/${session}/steps`, {})).body.rows).toEqual([]);

    const attributes = {
      specversion: '1.0',
      id: 'ce-1',
      source: JIRA,
      type: 'dev.ctxflow.ticket.commented',
      subject: 'PROJ-7',
      time: '2024-05-01T09:30:00Z',
    };
    const extra = {
      id: `generic:x-${tag}`,
      source: 'generic',
      ticket: 'T-9',
      eventId: `x-${tag}`,
      kind: 'updated',
      summary: 'Plain record with a field from a newer producer',
      occurredAt: '2024-05-01T09:30:00.000Z',
      receivedAt: '2024-05-01T09:30:01.000Z',
      sentiment: 'negative',
    };
    const producer = new kafkajs.Kafka({
      clientId: `foreign-producer-${tag}`,
      brokers: requireKafka(),
      logLevel: kafkajs.logLevel.NOTHING,
    }).producer();
    await producer.connect();
    cleanups.push(() => producer.disconnect());
    const sent = await producer.send({
      topic,
      messages: [
        binary(attributes, { summary: 'Binary: customer replied', version: 1 }),
        {
          key: 'PROJ-7',
          headers: { 'content-type': 'application/cloudevents+json; charset=utf-8' },
          value: JSON.stringify({
            ...attributes,
            id: 'ce-2',
            type: 'dev.ctxflow.ticket.status',
            datacontenttype: 'application/json',
            data: { summary: 'Structured: status pending', version: 2 },
          }),
        },
        binary(attributes, { summary: 'Binary: customer replied', version: 1 }), // the same event again
        binary({ ...attributes, id: 'ce-3', ctxflowtenant: 'another-tenant' }, { summary: 'Another tenant secret' }),
        { key: 'T-9', value: JSON.stringify(extra) },
        { key: 'PROJ-7', value: '{"id": "not json', headers: { ce_id: 'poison' } },
      ],
    });
    const last = BigInt(sent[0]!.baseOffset!) + 5n;
    for (let i = 0; i < 600; i++) {
      const at = await feedStreams.resumeFrom(topic, 0);
      if (at !== undefined && BigInt(at) > last) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(BigInt((await feedStreams.resumeFrom(topic, 0)) ?? '-1')).toBeGreaterThan(last);

    const entries = await entriesOf({ feedStreams, subscriptions }, session);
    expect(entries.map((e) => e.update.id)).toEqual([`cloudevents:${JIRA}:ce-1`, `cloudevents:${JIRA}:ce-2`, extra.id]);
    expect(entries[0]!.update).toMatchObject({
      source: 'cloudevents',
      ticket: 'PROJ-7',
      scope: JIRA,
      kind: 'commented',
    });
    expect(entries[2]!.update).toEqual(extra);

    const step = (await harness.call('POST', `/sessions/${session}/steps`, {})).body;
    const content = step.rows.map((r: { content: string }) => r.content).join('\n');
    expect(content.split('Binary: customer replied').length - 1).toBe(1);
    expect(content.split('Structured: status pending').length - 1).toBe(1);
    expect(content).toContain('Plain record with a field from a newer producer');
    expect(content).not.toContain('Another tenant secret');
    expect((await harness.call('POST', `/sessions/${session}/steps`, {})).body.rows).toEqual([]);
  }, 120_000);
});
