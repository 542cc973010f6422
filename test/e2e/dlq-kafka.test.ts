/**
 * Dead letters on real Kafka, through the services' own consumers (in this
 * process, on a unique KAFKA_TOPIC_PREFIX) and `npm run dlq`: a poison
 * ticket update and a step request for a session not yet created land on the
 * dead-letter topics with their reason and position; after the fix (the update
 * corrected by a replay transform; the session created) a replay delivers
 * them, and a second replay delivers nothing twice.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { createBus, readTopic } from '@ctxflow/bus';
import { DEFAULT_TENANT, DLQ_HEADERS, RECORD_ID_HEADER, TOPICS, ticketKey } from '@ctxflow/contracts';
import type { AuditEvent } from '@ctxflow/service-kit';
import { createEngine, MemorySessionStore, startStepRequestConsumer } from '@ctxflow/session-runner';
import { MemoryFeedStreams, StepContextService } from '@ctxflow/step-context';
import { MemorySubscriptionStore } from '@ctxflow/subscriptions';
import kafkajs from 'kafkajs';
import { afterAll, describe, expect, it } from 'vitest';
import { listDeadLetters, replayDeadLetters, sourceRecordOf } from '../../scripts/dlq.ts';
import { entriesOf, eventually, makeUpdate } from '../../services/step-context/test/helpers.ts';
import { requireKafka } from '../support/services.ts';

const run = randomUUID().slice(0, 8);
const prefix = `ctxflow-test-dlq-${run}.`;
const cleanups: (() => Promise<unknown>)[] = [];

afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  const admin = new kafkajs.Kafka({
    clientId: 'ctxflow-test-cleanup',
    brokers: requireKafka(),
    logLevel: kafkajs.logLevel.NOTHING,
  }).admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const ours = Object.values(TOPICS)
      .map((t) => `${prefix}${t}`)
      .filter((n) => existing.has(n));
    if (ours.length > 0) await admin.deleteTopics({ topics: ours });
  } finally {
    await admin.disconnect();
  }
});

/** `npm run dlq -- ...args` against the shared broker and this file's prefix; its stdout. */
async function dlq(...args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--disable-warning=TimeoutNegativeWarning', 'scripts/dlq.ts', ...args],
    { env: { ...process.env, KAFKA_BROKERS: requireKafka().join(','), KAFKA_TOPIC_PREFIX: prefix } },
  );
  return stdout;
}

describe('dead-letter topics on Kafka', () => {
  it('DLQ5: poison lands on the DLQ with reason and position; replay after the fix delivers it; a second replay nothing', async () => {
    const brokers = requireKafka();
    const bus = createBus({ client: 'kafkajs', clientId: `dlq-test-${run}`, brokers, topicPrefix: prefix });
    cleanups.push(
      () => bus.admin.close(),
      () => bus.publisher.close(),
    );
    await bus.admin.ensureTopics(Object.values(TOPICS).map((name) => ({ name, partitions: 2 })));

    // step-context on the prefixed topics.
    const subscriptions = new MemorySubscriptionStore();
    const feedStreams = new MemoryFeedStreams({ subscriptions });
    await subscriptions.subscribe(DEFAULT_TENANT, 'ses_feed', { source: 'generic', ticket: '*' });
    const stepContext = new StepContextService({
      subscriber: bus.subscriber,
      deadLetters: bus.publisher,
      feedStreams,
      subscriptions,
    });
    await stepContext.start();
    cleanups.push(() => stepContext.stop());

    // session-runner's step-request consumer; the first session created gets a known id.
    const sessionId = `ses_${run}`;
    let ids = 0;
    const store = new MemorySessionStore();
    const engine = createEngine({
      store,
      newId: (p) => (p === 'ses' && ids++ === 0 ? sessionId : `${p}_${randomUUID()}`),
    });
    const consumer = await startStepRequestConsumer({
      engine,
      store,
      subscriber: bus.subscriber,
      publisher: bus.publisher,
    });
    cleanups.push(() => consumer.close());
    await consumer.ready();
    const results: Record<string, unknown>[] = [];
    const resultsSub = await bus.subscriber.subscribe({
      topic: TOPICS.stepResults,
      groupId: `dlq-test-results-${run}`,
      async handle(records) {
        for (const r of records) results.push(JSON.parse(r.value));
      },
    });
    cleanups.push(() => resultsSub.close());
    await resultsSub.ready();

    // Poison: an update without its summary, bytes that are not JSON; a request for a session not there yet.
    const update = makeUpdate({ ticket: `T-${run}` });
    const { summary: _, ...withoutSummary } = update;
    await bus.publisher.publish(TOPICS.ticketUpdates, [
      { key: ticketKey(update), value: JSON.stringify(withoutSummary), headers: { [RECORD_ID_HEADER]: update.id } },
      { key: ticketKey(update), value: '{"id":' },
    ]);
    await bus.publisher.publish(TOPICS.stepRequests, [
      { key: sessionId, value: JSON.stringify({ sessionId, requestId: `req-${run}` }) },
    ]);

    // On the DLQs with reason and position, as `npm run dlq -- list` shows them.
    await eventually(async () => {
      expect(await listDeadLetters({ brokers, topicPrefix: prefix })).toHaveLength(3);
    }, 60_000);
    const letters = await listDeadLetters({ brokers, topicPrefix: prefix });
    const invalid = letters.find((l) => l.reason === 'invalid')!;
    const failed = letters.find((l) => l.reason === 'failed')!;
    expect(invalid.source.topic).toBe(`${prefix}${TOPICS.ticketUpdates}`);
    expect(invalid.dlq.topic).toBe(`${prefix}${TOPICS.ticketUpdatesDlq}`);
    expect(invalid.key).toBe(ticketKey(update));
    expect(invalid.headers[RECORD_ID_HEADER]).toBe(update.id);
    expect(invalid.error).toMatch(/^summary: /);
    expect(letters.find((l) => l.reason === 'not_json')).toMatchObject({
      source: { topic: invalid.source.topic, partition: invalid.source.partition },
      value: '{"id":',
    });
    expect(BigInt(letters.find((l) => l.reason === 'not_json')!.source.offset)).toBe(
      BigInt(invalid.source.offset) + 1n,
    );
    expect(failed).toMatchObject({
      source: { topic: `${prefix}${TOPICS.stepRequests}`, offset: '0' },
      error: 'state_session_not_found: session not found',
      key: sessionId,
    });
    const listed = await dlq('list');
    expect(listed).toContain(
      `${invalid.source.topic}[${invalid.source.partition}]@${invalid.source.offset}  invalid  pending  key="${ticketKey(update)}"`,
    );
    expect(listed).toContain(
      `${failed.source.topic}[${failed.source.partition}]@0  failed  pending  key="${sessionId}"`,
    );
    expect(listed).toContain('3 dead letter(s)');
    // The poison never reached a session; the refusal was answered.
    expect(await entriesOf({ feedStreams, subscriptions }, 'ses_feed')).toEqual([]);
    await eventually(async () => expect(results).toHaveLength(1));
    expect(results[0]).toMatchObject({ requestId: `req-${run}`, ok: false });

    // The fixes: the session is created; the update is corrected on its way back.
    const session = await engine.createSession(DEFAULT_TENANT, {});
    expect(session.sessionId).toBe(sessionId);
    await engine.addContext(DEFAULT_TENANT, { sessionId, items: [{ kind: 'notice', content: 'n1' }] });
    expect(await dlq('replay', '--topic', 'step-requests')).toContain('1 record(s) replayed');
    const audited: AuditEvent[] = [];
    const audit = { log: { record: (event: AuditEvent) => audited.push(event) }, subject: 'operator:test' };
    const fixed = await replayDeadLetters(
      { brokers, topicPrefix: prefix, topics: ['ticket-updates'], reason: 'invalid', audit },
      (l) => ({ ...sourceRecordOf(l), value: JSON.stringify({ ...JSON.parse(l.value), summary: 'fixed' }) }),
    );
    expect(fixed.map((l) => l.source.offset)).toEqual([invalid.source.offset]);
    expect(audited).toEqual([
      {
        tenant: '*',
        subject: 'operator:test',
        action: 'dead-letters.replay',
        target: `${invalid.source.topic}:${invalid.source.partition}:${invalid.source.offset}`,
        outcome: 'ok',
      },
    ]);

    // Delivered: the step ran and answered; the corrected update reached its session.
    await eventually(async () => expect(results).toHaveLength(2), 30_000);
    expect(results[1]).toMatchObject({ requestId: `req-${run}`, sessionId, ok: true });
    await eventually(async () => {
      const entries = await entriesOf({ feedStreams, subscriptions }, 'ses_feed');
      expect(entries.map((e) => e.update)).toEqual([{ ...update, summary: 'fixed' }]);
    }, 30_000);

    // A second replay of the same records delivers nothing: nothing re-published, nothing applied twice.
    const sourceEnds = async () =>
      (await readTopic({ brokers, clientId: 'dlq-test' }, `${prefix}${TOPICS.stepRequests}`)).length +
      (await readTopic({ brokers, clientId: 'dlq-test' }, `${prefix}${TOPICS.ticketUpdates}`)).length;
    const before = await sourceEnds();
    expect(await dlq('replay', '--topic', 'step-requests')).toContain('0 record(s) replayed');
    expect(await dlq('replay', '--reason', 'invalid')).toContain('0 record(s) replayed');
    expect(await sourceEnds()).toBe(before);
    // The one not replayed is still pending; the replayed ones show as such with --all.
    const pending = await dlq('list');
    expect(pending).toContain('not_json  pending');
    expect(pending).toContain('1 dead letter(s)');
    expect(await dlq('list', '--all')).toContain('invalid  replayed');
    expect((await engine.inspect(DEFAULT_TENANT, sessionId)).steps).toHaveLength(1);
    expect(results).toHaveLength(2);
    expect(await entriesOf({ feedStreams, subscriptions }, 'ses_feed')).toHaveLength(1);
    // The DLQ headers are not carried back onto the source topic.
    const replayedRecord = (await readTopic({ brokers, clientId: 'dlq-test' }, `${prefix}${TOPICS.stepRequests}`)).at(
      -1,
    )!;
    expect(Object.keys(replayedRecord.headers).filter((h) => h.startsWith('ctxflow-dlq-'))).toEqual([]);
    expect(DLQ_HEADERS.reason).toBe('ctxflow-dlq-reason');
  }, 120_000);
});
