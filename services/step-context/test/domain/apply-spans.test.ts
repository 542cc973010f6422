/**
 * StepContextService with telemetry: one CONSUMER `ctxflow.step_context.apply`
 * span per record, child of the record's `traceparent` header, its own
 * traceparent stored with the entries it appended (the runner links its
 * context pass to it), all the spans of a run ended once the run's single
 * atomic write is done, never the active span while the stores run.
 */

import { randomBytes, randomUUID } from 'node:crypto';
import { createMemoryBus, type IncomingRecord } from '@ctxflow/bus';
import { DEFAULT_TENANT } from '@ctxflow/contracts';
import { type FeedStreams, MemoryFeedStreams, RECORD_ID_HEADER, StepContextService } from '@ctxflow/step-context';
import { MemorySubscriptionStore } from '@ctxflow/subscriptions';
import { TRACEPARENT_HEADER } from '@ctxflow/telemetry';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestTelemetry, type TestTelemetry } from '../../../../test/support/telemetry.ts';
import { entriesOf, makeUpdate } from '../helpers.ts';

/** OpenTelemetry SpanKind.CONSUMER; 2 is SpanStatusCode.ERROR. */
const CONSUMER = 4;
const ERROR = 2;

class RecordingLog {
  infos: { fields: Record<string, unknown>; message: string }[] = [];
  info(fields: object, message: string) {
    this.infos.push({ fields: fields as Record<string, unknown>, message });
  }
  warn() {}
  error() {}
}

/** A memory batch store whose applyRun is `applyRun` (given the store to pass the call on to). */
function wrapBatches(
  applyRun: (
    records: Parameters<FeedStreams['applyRun']>[0],
    inner: FeedStreams,
  ) => ReturnType<FeedStreams['applyRun']>,
): FeedStreams {
  const inner = new MemoryFeedStreams();
  return {
    append: (u) => inner.append(u),
    readSince: (f, a, l) => inner.readSince(f, a, l),
    positionOf: (tenant, source) => inner.positionOf(tenant, source),
    recordOffset: (p) => inner.recordOffset(p),
    resumeFrom: (topic, p) => inner.resumeFrom(topic, p),
    storedPartition: (t: string, p: number) => inner.storedPartition(t, p),
    rebindPartition: (...args: Parameters<FeedStreams['rebindPartition']>) => inner.rebindPartition(...args),
    applyUpdate: (u, p) => inner.applyUpdate(u, p),
    applyRun: (records) => applyRun(records, inner),
  };
}

/** A traceparent of a fresh trace, as the feed-ingestor's publish span writes it. */
function remoteParent(flags = '01') {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-${flags}` };
}

describe('StepContextService apply spans', () => {
  const manager = new AsyncLocalStorageContextManager();
  let t: TestTelemetry;
  beforeAll(() => {
    context.setGlobalContextManager(manager.enable());
  });
  afterAll(() => {
    context.disable();
  });
  beforeEach(() => {
    t = createTestTelemetry();
  });
  afterEach(async () => {
    await t.shutdown();
  });

  function setup(options: { feedStreams?: FeedStreams; log?: RecordingLog } = {}) {
    const topic = `ticket-updates-${randomUUID()}`;
    const subscriptions = new MemorySubscriptionStore();
    const feedStreams = new MemoryFeedStreams({ subscriptions });
    const log = options.log ?? new RecordingLog();
    const service = new StepContextService({
      subscriber: createMemoryBus().subscriber,
      feedStreams: options.feedStreams ?? feedStreams,
      subscriptions,
      log,
      topic,
      telemetry: t.consumerTelemetry,
    });
    let offset = 0;
    const record = (value: string, headers: Record<string, string>): IncomingRecord => ({
      topic,
      partition: 2,
      offset: String(offset++),
      key: 'generic:T-1',
      value,
      headers,
    });
    return { topic, feedStreams, subscriptions, log, service, record };
  }

  it('one CONSUMER span per record, child of its traceparent; its traceparent stored with the entries and named in the log line', async () => {
    const { topic, feedStreams, subscriptions, log, service, record } = setup();
    await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: 'T-1' });
    await subscriptions.subscribe(DEFAULT_TENANT, 's2', { source: 'generic', ticket: 'T-1' });
    const u1 = makeUpdate();
    const u2 = makeUpdate();
    const u3 = makeUpdate();
    const [p1, p2, pPoison] = [remoteParent(), remoteParent(), remoteParent()];
    await service.handle([
      record(JSON.stringify(u1), { [RECORD_ID_HEADER]: u1.id, [TRACEPARENT_HEADER]: p1.traceparent }),
      record('{not json', { [TRACEPARENT_HEADER]: pPoison.traceparent }),
      record(JSON.stringify(u2), { [RECORD_ID_HEADER]: u2.id, [TRACEPARENT_HEADER]: p2.traceparent }),
      // No traceparent (a producer without telemetry): a span of its own trace.
      record(JSON.stringify(u3), { [RECORD_ID_HEADER]: u3.id }),
    ]);

    const spans = await t.spans();
    expect(spans.map((s) => [s.name, s.kind, s.statusCode])).toEqual(
      Array.from({ length: 4 }, () => ['ctxflow.step_context.apply', CONSUMER, 0]),
    );
    const [s1, sPoison, s2, s3] = spans;
    expect(s1).toMatchObject({ traceId: p1.traceId, parentSpanId: p1.spanId });
    expect(sPoison).toMatchObject({ traceId: pPoison.traceId, parentSpanId: pPoison.spanId });
    expect(s2).toMatchObject({ traceId: p2.traceId, parentSpanId: p2.spanId });
    expect(s3!.parentSpanId).toBeUndefined();
    expect(new Set(spans.map((s) => s.traceId)).size).toBe(4);
    expect(s1!.attributes).toEqual({
      'ctxflow.topic': topic,
      'ctxflow.partition': 2,
      'ctxflow.ticket': 'T-1',
      'ctxflow.feed.source': 'generic',
      'ctxflow.feed.event_id': u1.id,
    });
    expect(sPoison!.attributes).toEqual({ 'ctxflow.topic': topic, 'ctxflow.partition': 2 });

    const own = (s: typeof s1) => `00-${s!.traceId}-${s!.spanId}-01`;
    const expected = [
      { source: 'generic', seq: 1, update: u1, traceparent: own(s1) },
      { source: 'generic', seq: 2, update: u2, traceparent: own(s2) },
      { source: 'generic', seq: 3, update: u3, traceparent: own(s3) },
    ];
    expect(await entriesOf({ feedStreams, subscriptions }, 's1')).toEqual(expected);
    expect(await entriesOf({ feedStreams, subscriptions }, 's2')).toEqual(expected);

    expect(log.infos.map((l) => [l.message, l.fields.updateId, l.fields.trace_id, l.fields.span_id])).toEqual([
      ['ticket update applied', u1.id, s1!.traceId, s1!.spanId],
      ['ticket update applied', u2.id, s2!.traceId, s2!.spanId],
      ['ticket update applied', u3.id, s3!.traceId, s3!.spanId],
    ]);
  });

  it('the spans of a run are open during its store calls, none of them active, and all end once its write is done', async () => {
    const seen: { ended: number; active: boolean }[] = [];
    const watching = wrapBatches(async (records, inner) => {
      seen.push({ ended: (await t.spans()).length, active: trace.getActiveSpan() !== undefined });
      return inner.applyRun(records);
    });
    const { subscriptions, record, service } = setup({ feedStreams: watching });
    await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: 'T-1' });
    const updates = [makeUpdate(), makeUpdate(), makeUpdate()];
    await service.handle(
      updates.map((u) =>
        record(JSON.stringify(u), { [RECORD_ID_HEADER]: u.id, [TRACEPARENT_HEADER]: remoteParent().traceparent }),
      ),
    );
    expect(seen).toEqual([{ ended: 0, active: false }]);
    expect(await t.spans()).toHaveLength(3);
  });

  it('a failed write ends every span of its run with status ERROR and rejects the delivery', async () => {
    const broken = wrapBatches(async () => {
      throw new Error('store down');
    });
    const { subscriptions, record, service } = setup({ feedStreams: broken });
    await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: 'T-1' });
    const updates = [makeUpdate(), makeUpdate()];
    await expect(
      service.handle(
        updates.map((u) => record(JSON.stringify(u), { [TRACEPARENT_HEADER]: remoteParent().traceparent })),
      ),
    ).rejects.toThrow('store down');
    const spans = await t.spans();
    expect(spans.map((s) => [s.statusCode, s.statusMessage])).toEqual([
      [ERROR, 'store down'],
      [ERROR, 'store down'],
    ]);
  });

  it('an unsampled parent yields an unrecorded span: no traceparent stored, nothing exported', async () => {
    const { feedStreams, subscriptions, record, service } = setup();
    await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: 'T-1' });
    const u = makeUpdate();
    const parent = remoteParent('00');
    await service.handle([record(JSON.stringify(u), { [TRACEPARENT_HEADER]: parent.traceparent })]);
    expect(await entriesOf({ feedStreams, subscriptions }, 's1')).toEqual([{ source: 'generic', seq: 1, update: u }]);
    expect(await t.spans()).toEqual([]);
  });

  it('builds no "ticket update applied" line when the logger says info lines are not written', async () => {
    const quiet = setup({
      log: Object.assign(new RecordingLog(), { isLevelEnabled: (level: string) => level !== 'info' }),
    });
    await quiet.subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: 'T-1' });
    const u = makeUpdate();
    await quiet.service.handle([quiet.record(JSON.stringify(u), { [TRACEPARENT_HEADER]: remoteParent().traceparent })]);
    expect(quiet.log.infos).toEqual([]);
    expect(await entriesOf(quiet, 's1')).toHaveLength(1);
  });
});
