import type { IncomingRecord } from '@ctxflow/bus';
import { DEFAULT_TENANT, TOPICS } from '@ctxflow/contracts';
import { MemoryFeedStreams, parseTicketUpdateRecord, StepContextService } from '@ctxflow/step-context';
import { MemorySubscriptionStore } from '@ctxflow/subscriptions';
import { CloudEvent, Kafka } from 'cloudevents';
import { describe, expect, it } from 'vitest';
import { entriesOf, makeUpdate } from '../helpers.ts';

const SOURCE = 'https://jira.example.com';
const NOW = '2024-05-01T09:31:00.000Z';

function record(value: string, headers: Record<string, string> = {}, offset = 0): IncomingRecord {
  return { topic: TOPICS.ticketUpdates, partition: 0, offset: String(offset), key: 'k', value, headers };
}

/** Binary mode of the Kafka binding: `ce_*` headers, the JSON data as the value. */
function binaryRecord(attributes: Record<string, string>, data: unknown, offset = 0): IncomingRecord {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  for (const [name, value] of Object.entries(attributes)) headers[`ce_${name}`] = value;
  return record(JSON.stringify(data), headers, offset);
}

const ATTRIBUTES = {
  specversion: '1.0',
  id: 'evt-1',
  source: SOURCE,
  type: 'dev.ctxflow.ticket.commented',
  subject: 'PROJ-7',
  time: '2024-05-01T09:30:00Z',
};
const DATA = { summary: 'Customer replied', url: `${SOURCE}/browse/PROJ-7` };
const MAPPED = {
  id: `cloudevents:${SOURCE}:evt-1`,
  source: 'cloudevents',
  ticket: 'PROJ-7',
  scope: SOURCE,
  eventId: 'evt-1',
  kind: 'commented',
  summary: 'Customer replied',
  url: `${SOURCE}/browse/PROJ-7`,
  occurredAt: '2024-05-01T09:30:00.000Z',
  receivedAt: NOW,
};

describe('records of the ticket-updates topic', () => {
  it('tolerant reader: a TicketUpdate with unknown fields (top level and in changes) is read and keeps them', () => {
    const update = {
      ...makeUpdate({ changes: [{ field: 'status', from: 'open', to: 'pending', actor: 'ann' } as never] }),
      priorityScore: 7,
    };
    const parsed = parseTicketUpdateRecord(record(JSON.stringify(update)), NOW);
    expect(parsed).toEqual({ update, format: 'ticket-update' });
  });

  it('a TicketUpdate of a configured source is read; a source that breaks the name rule is poison', () => {
    const update = makeUpdate({ source: 'my-tracker' });
    expect(parseTicketUpdateRecord(record(JSON.stringify(update)), NOW)).toEqual({ update, format: 'ticket-update' });
    const bad = parseTicketUpdateRecord(record(JSON.stringify({ ...update, source: 'My Tracker' })), NOW);
    expect(bad).toMatchObject({ problem: 'not a valid TicketUpdate' });
  });

  it('CloudEvents binary mode: ce_* headers map to the update; ce_ctxflowtenant names the tenant', () => {
    expect(parseTicketUpdateRecord(binaryRecord(ATTRIBUTES, DATA), NOW)).toEqual({
      update: MAPPED,
      format: 'cloudevents-binary',
    });
    const tenanted = parseTicketUpdateRecord(binaryRecord({ ...ATTRIBUTES, ctxflowtenant: 'acme' }, DATA), NOW);
    expect(tenanted).toEqual({ update: { ...MAPPED, tenant: 'acme' }, format: 'cloudevents-binary' });
  });

  it('CloudEvents structured mode (the SDK Kafka binding output), with and without time', () => {
    const event = new CloudEvent({ ...ATTRIBUTES, data: DATA });
    const message = Kafka.structured(event);
    const parsed = parseTicketUpdateRecord(
      record(String(message.value), { 'content-type': String(message.headers['content-type']) }),
      NOW,
    );
    expect(parsed).toEqual({ update: MAPPED, format: 'cloudevents-structured' });
    const { time: _time, ...noTime } = ATTRIBUTES;
    const untimed = record(JSON.stringify({ ...noTime, data: DATA }), {
      'content-type': 'application/cloudevents+json',
    });
    expect(parseTicketUpdateRecord(untimed, NOW)).toEqual({
      update: { ...MAPPED, occurredAt: NOW },
      format: 'cloudevents-structured',
    });
  });

  it('invalid CloudEvents are poison naming the attribute', () => {
    const { source: _source, ...noSource } = ATTRIBUTES;
    const cases: [IncomingRecord, string][] = [
      [binaryRecord(noSource, DATA), 'source: required (a non-empty string)'],
      [
        binaryRecord({ ...ATTRIBUTES, type: 'com.example.x' }, DATA),
        'type: not accepted (expected dev.ctxflow.ticket.<kind>, e.g. dev.ctxflow.ticket.updated)',
      ],
      [binaryRecord({ ...ATTRIBUTES, ctxflowtenant: '' }, DATA), 'ctxflowtenant: expected a tenant name'],
      [binaryRecord(ATTRIBUTES, 'text'), 'data: expected a JSON object'],
      [
        record(JSON.stringify({ ...ATTRIBUTES, specversion: '0.3', data: DATA }), {
          'content-type': 'application/cloudevents+json',
        }),
        'specversion: expected "1.0"',
      ],
    ];
    for (const [input, message] of cases) {
      const parsed = parseTicketUpdateRecord(input, NOW);
      expect(parsed).toMatchObject({ problem: 'not a valid CloudEvent' });
      expect('issues' in parsed && parsed.issues[0]).toContain(message);
    }
  });

  it('the consumer applies a record with an extra field and CloudEvents records; a repeated event id once', async () => {
    const subscriptions = new MemorySubscriptionStore();
    const feedStreams = new MemoryFeedStreams({ subscriptions });
    const unused = {
      subscribe: async () => {
        throw new Error('unused');
      },
    };
    const service = new StepContextService({ subscriber: unused, feedStreams, subscriptions });
    await subscriptions.subscribe(DEFAULT_TENANT, 's-1', { source: 'cloudevents', ticket: '*', scope: SOURCE });
    await subscriptions.subscribe(DEFAULT_TENANT, 's-1', { source: 'generic', ticket: 'T-1' });
    const extra = { ...makeUpdate({ ticket: 'T-1' }), priorityScore: 7 };
    await service.handle([
      record(JSON.stringify(extra), {}, 0),
      binaryRecord(ATTRIBUTES, DATA, 1),
      binaryRecord(ATTRIBUTES, DATA, 2), // the same event again
      binaryRecord({ ...ATTRIBUTES, id: 'evt-2', subject: 'PROJ-8' }, { title: 'New ticket' }, 3),
    ]);
    const entries = await entriesOf({ feedStreams, subscriptions }, 's-1');
    expect(entries.map((e) => e.update.id)).toEqual([extra.id, MAPPED.id, `cloudevents:${SOURCE}:evt-2`]);
    expect(entries[0]!.update).toEqual(extra);
    expect(entries[2]!.update).toMatchObject({ ticket: 'PROJ-8', summary: 'New ticket', title: 'New ticket' });
  });
});
