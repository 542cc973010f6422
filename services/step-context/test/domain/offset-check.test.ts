/**
 * The stored offset against the partition's log at an assignment
 * (domain/offset-check.ts): the decision alone, then StepContextService on the
 * in-memory bus and stores with the topic created again, the stored offset
 * rewritten as a Redis restored from another copy would leave it, and each
 * reset policy.
 */
import { randomUUID } from 'node:crypto';
import { createMemoryBus, type MemoryBus, type PartitionLog } from '@ctxflow/bus';
import { DEFAULT_TENANT, ticketKey } from '@ctxflow/contracts';
import {
  checkStoredOffset,
  MemoryFeedStreams,
  type OffsetResetPolicy,
  resetTarget,
  StepContextService,
} from '@ctxflow/step-context';
import { MemorySubscriptionStore } from '@ctxflow/subscriptions';
import { METRIC_OFFSET_MISMATCHES } from '@ctxflow/telemetry';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestTelemetry, type TestTelemetry } from '../../../../test/support/telemetry.ts';
import { entriesOf, eventually, makeUpdate } from '../helpers.ts';

const A = '6f1c2a9e-0d4b-4c57-9a51-0b1f7c3e2d10';
const B = 'c0ffee00-1234-4abc-8def-0123456789ab';
const log = (start: string, end: string, topicId: string | undefined = A): PartitionLog =>
  topicId === undefined ? { start, end } : { topicId, start, end };

describe('checkStoredOffset: the stored state against the log', () => {
  it.each([
    ['nothing stored: the bus default, and the log is bound', {}, log('0', '10'), { next: undefined, bind: A }],
    [
      'an offset of no known log: resumed after it, the log bound',
      { offset: '4' },
      log('0', '10'),
      { next: '5', bind: A },
    ],
    ['an offset of this log', { offset: '4', topicId: A }, log('0', '10'), { next: '5' }],
    ['caught up: the next offset is the end', { offset: '9', topicId: A }, log('0', '10'), { next: '10' }],
    ['the first record still held is the next', { offset: '4', topicId: A }, log('5', '10'), { next: '5' }],
    ['reset before, nothing consumed since: the log start', { topicId: A }, log('3', '10'), { next: '3' }],
    [
      "another log's id with no offset: nothing to skip, rebound, from the start",
      { topicId: A },
      log('0', '3', B),
      { next: '0', bind: B },
    ],
    [
      'a broker without topic ids: the range alone',
      { offset: '4', topicId: A },
      log('0', '10', undefined),
      { next: '5' },
    ],
    [
      'offsets past 2^53 compare exactly',
      { offset: '9007199254740992', topicId: A },
      log('0', '9007199254740994'),
      { next: '9007199254740993' },
    ],
  ])('%s', (_what, stored, partitionLog, expected) => {
    expect(checkStoredOffset(stored, partitionLog)).toEqual({ verdict: 'resume', ...expected });
  });

  it.each([
    ['another topic id (the topic created again)', { offset: '4', topicId: A }, log('0', '10', B), 'topic_id'],
    ['another topic id even within range', { offset: '0', topicId: A }, log('0', '1000', B), 'topic_id'],
    ['past the end of this log', { offset: '10', topicId: A }, log('0', '10'), 'beyond_end'],
    ['past the end of a log with no stored id', { offset: '41', topicId: undefined }, log('0', '3'), 'beyond_end'],
    [
      'past the end, 2^53 and up',
      { offset: '9007199254740993', topicId: A },
      log('0', '9007199254740993'),
      'beyond_end',
    ],
    ['below the start: retention deleted unread records', { offset: '3', topicId: A }, log('5', '10'), 'below_start'],
  ])('%s: a mismatch', (_what, stored, partitionLog, mismatch) => {
    const definedStored = Object.fromEntries(Object.entries(stored).filter(([, v]) => v !== undefined));
    expect(checkStoredOffset(definedStored, partitionLog)).toEqual({ verdict: 'mismatch', mismatch });
  });

  it('resetTarget: earliest starts at the log start with no offset stored, latest at its end', () => {
    expect(resetTarget('earliest', { offset: '40', topicId: A }, log('2', '7', B))).toEqual({
      next: '2',
      stored: { topicId: B },
    });
    expect(resetTarget('latest', { offset: '40', topicId: A }, log('2', '7', B))).toEqual({
      next: '7',
      stored: { offset: '6', topicId: B },
    });
    expect(resetTarget('latest', { offset: '40' }, log('0', '0', B))).toEqual({ next: '0', stored: { topicId: B } });
    // A broker without topic ids: the stored id stays.
    expect(resetTarget('earliest', { offset: '40', topicId: A }, log('0', '3', undefined))).toEqual({
      next: '0',
      stored: { topicId: A },
    });
  });
});

class RecordingLog {
  readonly errors: { fields: Record<string, unknown>; message: string }[] = [];
  info() {}
  warn() {}
  error(fields: object, message: string) {
    this.errors.push({ fields: fields as Record<string, unknown>, message });
  }
}

describe('StepContextService: a stored offset that does not fit the log', () => {
  const running: (StepContextService | TestTelemetry)[] = [];
  afterEach(async () => {
    for (const r of running.splice(0)) await ('stop' in r ? r.stop() : r.shutdown());
  });

  /** One partition, one session following ticket T-1, stores kept across the service's runs. */
  function rig(offsetReset?: OffsetResetPolicy) {
    const topic = `ticket-updates-${randomUUID()}`;
    const groupId = `group-${randomUUID().slice(0, 8)}`;
    const bus: MemoryBus = createMemoryBus({ retryBackoffMs: 10 });
    const subscriptions = new MemorySubscriptionStore();
    const feedStreams = new MemoryFeedStreams({ subscriptions });
    const logs = new RecordingLog();
    const telemetry = createTestTelemetry();
    running.push(telemetry);
    const start = async () => {
      const service = new StepContextService({
        subscriber: bus.subscriber,
        feedStreams,
        subscriptions,
        topic,
        groupId,
        log: logs,
        telemetry: telemetry.consumerTelemetry,
        ...(offsetReset ? { offsetReset } : {}),
      });
      running.push(service);
      await service.start();
      return service;
    };
    const publish = async (...updates: ReturnType<typeof makeUpdate>[]) =>
      bus.publisher.publish(
        topic,
        updates.map((u) => ({ key: ticketKey(u), value: JSON.stringify(u) })),
      );
    const landed = async () => (await entriesOf({ feedStreams, subscriptions }, 's1')).map((e) => e.update.id);
    const mismatches = (attributes: Record<string, string | number>) =>
      telemetry.metric(METRIC_OFFSET_MISMATCHES, { 'ctxflow.topic': topic, 'ctxflow.partition': 0, ...attributes });
    return { topic, bus, feedStreams, subscriptions, logs, start, publish, landed, mismatches };
  }

  const updates = (n: number) => Array.from({ length: n }, () => makeUpdate({ ticket: 'T-1' }));

  it('the topic created again between two runs: the next update lands, an error line and the metric say so', async () => {
    const { topic, bus, feedStreams, subscriptions, logs, start, publish, landed, mismatches } = rig();
    await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: 'T-1' });
    const before = updates(3);
    const first = await start();
    await publish(...before);
    await eventually(async () => expect(await landed()).toEqual(before.map((u) => u.id)));
    const oldId = bus.topicId(topic)!;
    expect(await feedStreams.storedPartition(topic, 0)).toEqual({ offset: '2', topicId: oldId });
    await first.stop();

    bus.recreateTopic(topic);
    const newId = bus.topicId(topic)!;
    expect(newId).not.toBe(oldId);
    await start();
    // The assignment is checked before anything of the partition is delivered.
    await eventually(async () => expect(logs.errors).toHaveLength(1));
    const after = makeUpdate({ ticket: 'T-1' });
    await publish(after);
    await eventually(async () => expect(await landed()).toEqual([...before, after].map((u) => u.id)));
    expect(logs.errors).toEqual([
      {
        fields: {
          topic,
          partition: 0,
          mismatch: 'topic_id',
          storedOffset: '2',
          storedTopicId: oldId,
          topicId: newId,
          logStart: '0',
          logEnd: '0',
          reset: 'earliest',
          resumeAt: '0',
        },
        message:
          "stored offset does not fit the partition's log (it was read from another topic of this name): resuming at 0 (earliest)",
      },
    ]);
    expect(await mismatches({ 'ctxflow.offset.mismatch': 'topic_id', 'ctxflow.offset.reset': 'earliest' })).toBe(1);
    expect(await feedStreams.storedPartition(topic, 0)).toEqual({ offset: '0', topicId: newId });
  });

  it('the topic created again while the service runs: asked again, reset, the next update lands', async () => {
    const { topic, bus, subscriptions, logs, start, publish, landed, mismatches } = rig();
    await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: 'T-1' });
    const before = updates(2);
    await start();
    await publish(...before);
    await eventually(async () => expect(await landed()).toEqual(before.map((u) => u.id)));
    bus.recreateTopic(topic);
    const after = makeUpdate({ ticket: 'T-1' });
    await publish(after);
    await eventually(async () => expect(await landed()).toEqual([...before, after].map((u) => u.id)));
    expect(logs.errors.map((e) => e.fields.mismatch)).toEqual(['topic_id']);
    expect(await mismatches({ 'ctxflow.offset.mismatch': 'topic_id' })).toBe(1);
  });

  it('an offset past the end (a Redis from another copy), earliest: the partition is read again and nothing lands twice', async () => {
    const { topic, bus, feedStreams, subscriptions, logs, start, publish, landed, mismatches } = rig();
    await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: 'T-1' });
    const before = updates(3);
    const first = await start();
    await publish(...before);
    await eventually(async () => expect(await landed()).toEqual(before.map((u) => u.id)));
    await first.stop();
    const id = bus.topicId(topic)!;
    expect(
      await feedStreams.rebindPartition(topic, 0, { offset: '2', topicId: id }, { offset: '41', topicId: id }),
    ).toBe(true);

    await start();
    await eventually(async () => expect(logs.errors).toHaveLength(1));
    const after = makeUpdate({ ticket: 'T-1' });
    await publish(after);
    await eventually(async () => expect(await landed()).toEqual([...before, after].map((u) => u.id)));
    await eventually(async () =>
      expect(await feedStreams.storedPartition(topic, 0)).toEqual({ offset: '3', topicId: id }),
    );
    expect(await landed()).toEqual([...before, after].map((u) => u.id));
    expect(logs.errors.map((e) => [e.fields.mismatch, e.fields.storedOffset, e.fields.logEnd])).toEqual([
      ['beyond_end', '41', '3'],
    ]);
    expect(await mismatches({ 'ctxflow.offset.mismatch': 'beyond_end', 'ctxflow.offset.reset': 'earliest' })).toBe(1);
  });

  it('latest: resumes at the end of the new log, what it held is skipped (and said so)', async () => {
    const { topic, bus, subscriptions, logs, start, publish, landed } = rig('latest');
    await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: 'T-1' });
    const before = updates(2);
    const first = await start();
    await publish(...before);
    await eventually(async () => expect(await landed()).toEqual(before.map((u) => u.id)));
    await first.stop();
    bus.recreateTopic(topic);
    const skipped = updates(2);
    await publish(...skipped);

    await start();
    await eventually(async () => expect(logs.errors).toHaveLength(1));
    const after = makeUpdate({ ticket: 'T-1' });
    await publish(after);
    await eventually(async () => expect(await landed()).toEqual([...before, after].map((u) => u.id)));
    expect(logs.errors.map((e) => [e.fields.mismatch, e.fields.logEnd, e.fields.resumeAt, e.fields.reset])).toEqual([
      ['topic_id', '2', '2', 'latest'],
    ]);
  });

  it('fail: the partition is held, one error line, until the stored offset is repaired', async () => {
    const { topic, bus, feedStreams, subscriptions, logs, start, publish, landed, mismatches } = rig('fail');
    await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: 'T-1' });
    const before = updates(2);
    const first = await start();
    await publish(...before);
    await eventually(async () => expect(await landed()).toEqual(before.map((u) => u.id)));
    await first.stop();
    bus.recreateTopic(topic);

    await start();
    const held = makeUpdate({ ticket: 'T-1' });
    await publish(held);
    await eventually(async () => expect(logs.errors).toHaveLength(1));
    // Asked again every 10 ms meanwhile: still one line, one count, nothing applied.
    await new Promise((r) => setTimeout(r, 300));
    expect(await landed()).toEqual(before.map((u) => u.id));
    expect(logs.errors).toHaveLength(1);
    expect(logs.errors[0]!.fields).toMatchObject({ mismatch: 'topic_id', reset: 'fail', resumeAt: null });
    expect(logs.errors[0]!.message).toMatch(/partition held \(CTXFLOW_OFFSET_RESET=fail\)$/);
    expect(await mismatches({ 'ctxflow.offset.reset': 'fail' })).toBe(1);

    // The operator's repair: what is stored of the partition removed.
    const stored = await feedStreams.storedPartition(topic, 0);
    expect(await feedStreams.rebindPartition(topic, 0, stored, {})).toBe(true);
    await eventually(async () => expect(await landed()).toEqual([...before, held].map((u) => u.id)));
    expect(await feedStreams.storedPartition(topic, 0)).toEqual({ offset: '0', topicId: bus.topicId(topic) });
  });
});
