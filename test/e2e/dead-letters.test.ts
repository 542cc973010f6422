/**
 * Dead letters on the in-memory bus (the embedded default; the same code runs
 * on Kafka, see dlq-kafka.test.ts): a record that is not JSON, not valid, or
 * fails for good is published onto its topic's dead-letter topic with its
 * reason and position, its key, value and headers kept, before its offset is
 * recorded; a dead-letter publish that fails makes the record come again.
 */
import { randomUUID } from 'node:crypto';
import { createMemoryBus, type IncomingRecord, type OutgoingRecord, type Publisher } from '@ctxflow/bus';
import { CtxflowError, DEFAULT_TENANT, DLQ_HEADERS, RECORD_ID_HEADER, TOPICS, ticketKey } from '@ctxflow/contracts';
import { buildEmbeddedApp } from '@ctxflow/embedded';
import { createConsumerLag, createEngine, MemorySessionStore, startStepRequestConsumer } from '@ctxflow/session-runner';
import { type FeedStreams, MemoryFeedStreams, StepContextService } from '@ctxflow/step-context';
import { MemorySubscriptionStore } from '@ctxflow/subscriptions';
import { ATTR_CONSUMER_GROUP, ATTR_DLQ_REASON, ATTR_TOPIC, METRIC_DEAD_LETTERS } from '@ctxflow/telemetry';
import { describe, expect, it } from 'vitest';
import { entriesOf, eventually, makeUpdate } from '../../services/step-context/test/helpers.ts';
import { createTestTelemetry } from '../support/telemetry.ts';

type Bus = ReturnType<typeof createMemoryBus>;

/** Every record of `topic` from its start (a fresh consumer group). */
async function collect(bus: Pick<Bus, 'subscriber'>, topic: string) {
  const records: IncomingRecord[] = [];
  const sub = await bus.subscriber.subscribe({
    topic,
    groupId: `collect-${randomUUID()}`,
    async handle(batch) {
      records.push(...batch);
    },
  });
  return { records, close: () => sub.close() };
}

/** A publisher that refuses its first `failures` calls to `topic`, like a broker that did not acknowledge. */
function flaky(inner: Publisher, topic: string, failures: number): Publisher & { refused: number } {
  const p = {
    refused: 0,
    async publish(t: string, records: OutgoingRecord[]) {
      if (t === topic && p.refused < failures) {
        p.refused++;
        throw new CtxflowError('bus_unavailable', 'not acknowledged');
      }
      await inner.publish(t, records);
    },
    close: () => inner.close(),
  };
  return p;
}

function recordingTelemetry() {
  const deadLettered: { group: string; topic: string; reason: string }[] = [];
  return {
    deadLettered,
    telemetry: {
      lag() {},
      deadLettered: (e: { group: string; topic: string; reason: string }) => deadLettered.push(e),
      withSpan: <T>(_n: string, _a: unknown, fn: () => Promise<T>) => fn(),
      startSpan: () => ({ traceparent: undefined, logFields: () => ({}), end() {} }),
    },
  };
}

describe('dead letters: step-context (ticket updates)', () => {
  it('DLQ1: not-JSON and invalid records land on the DLQ with reason, position, key, value and headers, before the offset moves', async () => {
    const topic = `tu-${randomUUID()}`;
    const dlq = `${topic}.dlq`;
    const bus = createMemoryBus({ retryBackoffMs: 5 });
    const subscriptions = new MemorySubscriptionStore();
    const feedStreams = new MemoryFeedStreams({ subscriptions });
    await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: '*' });
    // The first two dead-letter publishes are not acknowledged: the run must come again, nothing skipped.
    const deadLetters = flaky(bus.publisher, dlq, 2);
    const { deadLettered, telemetry } = recordingTelemetry();
    const service = new StepContextService({
      subscriber: bus.subscriber,
      feedStreams,
      subscriptions,
      topic,
      deadLetterTopic: dlq,
      deadLetters,
      telemetry: telemetry as never,
    });
    await service.start();
    const out = await collect(bus, dlq);
    const u1 = makeUpdate({ ticket: 'T-1' });
    const u2 = makeUpdate({ ticket: 'T-2' });
    await bus.publisher.publish(topic, [
      { key: ticketKey(u1), value: JSON.stringify(u1), headers: { [RECORD_ID_HEADER]: u1.id } },
      { key: 'generic:T-1', value: '{not json', headers: { traceparent: 'tp-1', custom: 'kept' } },
      { key: 'generic:T-1', value: JSON.stringify({ ...u2, id: undefined }), headers: { [RECORD_ID_HEADER]: 'x' } },
      { key: ticketKey(u2), value: JSON.stringify(u2) },
    ]);
    await eventually(async () => expect(await feedStreams.resumeFrom(topic, 0)).toBe('4'));
    await eventually(async () => expect(out.records).toHaveLength(2));
    expect(deadLetters.refused).toBe(2);
    expect((await entriesOf({ feedStreams, subscriptions }, 's1')).map((e) => e.update.id)).toEqual([u1.id, u2.id]);
    const [notJson, invalid] = out.records;
    expect(notJson).toMatchObject({
      key: 'generic:T-1',
      value: '{not json',
      headers: {
        traceparent: 'tp-1',
        custom: 'kept',
        [DLQ_HEADERS.reason]: 'not_json',
        [DLQ_HEADERS.topic]: topic,
        [DLQ_HEADERS.partition]: '0',
        [DLQ_HEADERS.offset]: '1',
      },
    });
    expect(notJson!.headers[DLQ_HEADERS.error]).toMatch(/JSON/);
    expect(invalid).toMatchObject({
      key: 'generic:T-1',
      value: JSON.stringify({ ...u2, id: undefined }),
      headers: { [RECORD_ID_HEADER]: 'x', [DLQ_HEADERS.reason]: 'invalid', [DLQ_HEADERS.offset]: '2' },
    });
    expect(invalid!.headers[DLQ_HEADERS.error]).toMatch(/^id: /);
    expect(deadLettered).toEqual([
      { group: 'ctxflow-step-context', topic, reason: 'not_json' },
      { group: 'ctxflow-step-context', topic, reason: 'invalid' },
    ]);
    await out.close();
    await service.stop();
  });

  it('DLQ2: a record the store refuses with a non-retryable error is dead-lettered as failed; the rest of its run applies', async () => {
    const topic = `tu-${randomUUID()}`;
    const dlq = `${topic}.dlq`;
    const bus = createMemoryBus({ retryBackoffMs: 5 });
    const inner = new MemoryFeedStreams();
    const bad = makeUpdate({ ticket: 'T-bad' });
    // A store that refuses one update for good (as a validation refusal would).
    const feedStreams: FeedStreams = Object.assign(Object.create(inner), {
      applyRun: (records: Parameters<FeedStreams['applyRun']>[0]) =>
        records.some((r) => r.update?.id === bad.id)
          ? Promise.reject(new CtxflowError('validation_error', 'update refused'))
          : inner.applyRun(records),
      resumeFrom: (t: string, p: number) => inner.resumeFrom(t, p),
      storedPartition: (t: string, p: number) => inner.storedPartition(t, p),
      rebindPartition: (...args: Parameters<FeedStreams['rebindPartition']>) => inner.rebindPartition(...args),
    });
    const subscriptions = new MemorySubscriptionStore();
    await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: '*' });
    const service = new StepContextService({
      subscriber: bus.subscriber,
      feedStreams,
      subscriptions,
      topic,
      deadLetterTopic: dlq,
      deadLetters: bus.publisher,
    });
    await service.start();
    const out = await collect(bus, dlq);
    const u1 = makeUpdate({ ticket: 'T-1' });
    const u2 = makeUpdate({ ticket: 'T-2' });
    await bus.publisher.publish(
      topic,
      [u1, bad, u2].map((u) => ({ key: 'generic:k', value: JSON.stringify(u) })),
    );
    await eventually(async () => expect(await inner.resumeFrom(topic, 0)).toBe('3'));
    await eventually(async () => expect(out.records).toHaveLength(1));
    expect(out.records[0]!.headers).toMatchObject({
      [DLQ_HEADERS.reason]: 'failed',
      [DLQ_HEADERS.error]: 'validation_error: update refused',
      [DLQ_HEADERS.offset]: '1',
    });
    expect((await entriesOf({ feedStreams: inner, subscriptions }, 's1')).map((e) => e.update.id)).toEqual([
      u1.id,
      u2.id,
    ]);
    await out.close();
    await service.stop();
  });

  it('DLQ3: the embedded app dead-letters poison ticket updates on its in-memory bus', async () => {
    const embedded = await buildEmbeddedApp({ config: { apiKeys: new Map(), secrets: {} } });
    const out = await collect(embedded.bus, TOPICS.ticketUpdatesDlq);
    await embedded.bus.publisher.publish(TOPICS.ticketUpdates, [{ key: 'generic:X', value: 'nope' }]);
    await eventually(async () => expect(out.records).toHaveLength(1));
    expect(out.records[0]).toMatchObject({
      key: 'generic:X',
      value: 'nope',
      headers: { [DLQ_HEADERS.reason]: 'not_json', [DLQ_HEADERS.topic]: TOPICS.ticketUpdates },
    });
    await out.close();
    await embedded.close();
  });
});

describe('dead letters: session-runner (step requests)', () => {
  it('DLQ4: not JSON, invalid and failed-for-good requests land on the DLQ before the commit; a refused DLQ publish retries', async () => {
    const bus = createMemoryBus({ retryBackoffMs: 5 });
    const store = new MemorySessionStore();
    const engine = createEngine({ store });
    const publisher = flaky(bus.publisher, TOPICS.stepRequestsDlq, 1);
    const dead: { topic: string; reason: string }[] = [];
    const out = await collect(bus, TOPICS.stepRequestsDlq);
    const sub = await startStepRequestConsumer({
      engine,
      store,
      subscriber: bus.subscriber,
      publisher,
      groupId: `g-${randomUUID()}`,
      telemetry: { lag() {}, deadLettered: (e) => dead.push({ topic: e.topic, reason: e.reason }) },
    });
    await bus.publisher.publish(TOPICS.stepRequests, [
      { key: 'x', value: '{not json', headers: { traceparent: 'tp' } },
      { key: 'x', value: JSON.stringify({ sessionId: 'ses_x' }) },
      { key: 'x', value: JSON.stringify({ sessionId: 'ses_missing', requestId: 'r2' }) },
    ]);
    await eventually(async () => expect(out.records).toHaveLength(3));
    expect(publisher.refused).toBe(1);
    expect(out.records.map((r) => [r.value, r.headers[DLQ_HEADERS.reason], r.headers[DLQ_HEADERS.offset]])).toEqual([
      ['{not json', 'not_json', '0'],
      [JSON.stringify({ sessionId: 'ses_x' }), 'invalid', '1'],
      [JSON.stringify({ sessionId: 'ses_missing', requestId: 'r2' }), 'failed', '2'],
    ]);
    expect(out.records[0]!.headers.traceparent).toBe('tp');
    expect(out.records[2]!.headers[DLQ_HEADERS.error]).toBe('state_session_not_found: session not found');
    expect(dead).toEqual([
      { topic: TOPICS.stepRequests, reason: 'not_json' },
      { topic: TOPICS.stepRequests, reason: 'invalid' },
      { topic: TOPICS.stepRequests, reason: 'failed' },
    ]);
    await sub.close();
    await out.close();
  });
});

describe('dead letters: metrics', () => {
  it('DLQ6: ctxflow.consumer.dead_letters counts dead letters by reason, source topic and group, in both services', async () => {
    const t = createTestTelemetry();
    const bus = createMemoryBus({ retryBackoffMs: 5 });
    const topic = `tu-${randomUUID()}`;
    const service = new StepContextService({
      subscriber: bus.subscriber,
      feedStreams: new MemoryFeedStreams(),
      subscriptions: new MemorySubscriptionStore(),
      topic,
      deadLetters: bus.publisher,
      telemetry: t.consumerTelemetry,
    });
    await service.start();
    const store = new MemorySessionStore();
    const sub = await startStepRequestConsumer({
      engine: createEngine({ store }),
      store,
      subscriber: bus.subscriber,
      publisher: bus.publisher,
      telemetry: createConsumerLag(t),
    });
    const ticketsOut = await collect(bus, TOPICS.ticketUpdatesDlq);
    const stepsOut = await collect(bus, TOPICS.stepRequestsDlq);
    await bus.publisher.publish(topic, [
      { key: 'k', value: 'x' },
      { key: 'k', value: 'y' },
      { key: 'k', value: '{}' },
    ]);
    await bus.publisher.publish(TOPICS.stepRequests, [
      { key: 'k', value: 'x' },
      { key: 'k', value: JSON.stringify({ sessionId: 'ses_none', requestId: 'r' }) },
    ]);
    await eventually(async () => expect(ticketsOut.records.length + stepsOut.records.length).toBe(5));
    const count = (group: string, source: string, reason: string) =>
      t.metric(METRIC_DEAD_LETTERS, { [ATTR_CONSUMER_GROUP]: group, [ATTR_TOPIC]: source, [ATTR_DLQ_REASON]: reason });
    expect(await count('ctxflow-step-context', topic, 'not_json')).toBe(2);
    expect(await count('ctxflow-step-context', topic, 'invalid')).toBe(1);
    expect(await count('ctxflow-session-runner', TOPICS.stepRequests, 'not_json')).toBe(1);
    expect(await count('ctxflow-session-runner', TOPICS.stepRequests, 'failed')).toBe(1);
    expect(await t.metric(METRIC_DEAD_LETTERS)).toBe(5);
    await sub.close();
    await service.stop();
    await ticketsOut.close();
    await stepsOut.close();
  });
});
