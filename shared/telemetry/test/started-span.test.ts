/**
 * ConsumerTelemetry.startSpan: a span placed as withSpan places its span
 * (kind, remote parent from headers, links) but never made the active one,
 * ended by its owner; its traceparent and log fields are the span's own.
 */
import { noopConsumerTelemetry } from '@ctxflow/step-context';
import {
  extractTraceContext,
  type HeaderBag,
  injectTraceContext,
  SPAN_STEP_CONTEXT_APPLY,
  TRACEPARENT_HEADER,
  TRACESTATE_HEADER,
  traceLogFields,
} from '@ctxflow/telemetry';
import { context, defaultTextMapGetter, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestTelemetry, type TestTelemetry } from '../../../test/support/telemetry.ts';

const CONSUMER = 4;
const INTERNAL = 0;
const PARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe('ConsumerTelemetry.startSpan', () => {
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

  it('is a child of the traceparent in its headers, never the active span, and ends when told', async () => {
    const span = t.consumerTelemetry.startSpan(
      SPAN_STEP_CONTEXT_APPLY,
      { 'ctxflow.ticket': 'T-1' },
      { kind: 'consumer', parentHeaders: { [TRACEPARENT_HEADER]: PARENT, [TRACESTATE_HEADER]: 'vendor=x' } },
    );
    expect(trace.getActiveSpan()).toBeUndefined();
    expect(await t.spans()).toEqual([]);
    span.end();

    const [ended] = await t.spans();
    expect(ended).toMatchObject({
      name: 'ctxflow.step_context.apply',
      kind: CONSUMER,
      traceId: '0af7651916cd43dd8448eb211c80319c',
      parentSpanId: 'b7ad6b7169203331',
      attributes: { 'ctxflow.ticket': 'T-1' },
      statusCode: 0,
    });
    // The traceparent the W3C propagator would write for the span, read before and after its end alike.
    expect(span.traceparent).toBe(`00-${ended!.traceId}-${ended!.spanId}-01`);
    const ctx = trace.setSpanContext(context.active(), {
      traceId: ended!.traceId,
      spanId: ended!.spanId,
      traceFlags: 1,
    });
    expect(injectTraceContext({}, ctx)[TRACEPARENT_HEADER]).toBe(span.traceparent);
    expect(span.logFields()).toEqual({ trace_id: ended!.traceId, span_id: ended!.spanId });
    expect(span.logFields()).toEqual(traceLogFields(span.traceparent));
  });

  it('without a valid traceparent its parent is the active span; links and attributes are added', async () => {
    const linked = '00-11111111111111111111111111111111-2222222222222222-01';
    await t.contextTelemetry.withSpan('outer', {}, async (outer) => {
      const span = t.consumerTelemetry.startSpan(
        'inner',
        {},
        { parentHeaders: { [TRACEPARENT_HEADER]: 'not-a-traceparent' }, links: [linked] },
      );
      span.link(['00-33333333333333333333333333333333-4444444444444444-01']);
      span.setAttributes({ 'ctxflow.cursor': 4 });
      expect(trace.getActiveSpan()?.spanContext().spanId).toBe(outer.traceparent?.split('-')[2]);
      span.end();
    });
    const [inner, outer] = await t.spans();
    expect(inner).toMatchObject({
      name: 'inner',
      kind: INTERNAL,
      traceId: outer!.traceId,
      parentSpanId: outer!.spanId,
      attributes: { 'ctxflow.cursor': 4 },
      links: [
        { traceId: '11111111111111111111111111111111', spanId: '2222222222222222' },
        { traceId: '33333333333333333333333333333333', spanId: '4444444444444444' },
      ],
    });
  });

  it('end(error) records the error: status ERROR with its message', async () => {
    t.consumerTelemetry.startSpan('failing', {}).end(new Error('store down'));
    t.consumerTelemetry.startSpan('failing', {}).end('not an Error');
    expect((await t.spans()).map((s) => [s.statusCode, s.statusMessage])).toEqual([
      [2, 'store down'],
      [2, 'not an Error'],
    ]);
  });

  it('a span of an unsampled parent is not recorded: no traceparent, no log fields, nothing exported', async () => {
    const span = t.consumerTelemetry.startSpan(
      'unsampled',
      {},
      { parentHeaders: { [TRACEPARENT_HEADER]: PARENT.replace(/-01$/, '-00') } },
    );
    span.end();
    expect(span.traceparent).toBeUndefined();
    expect(span.logFields()).toEqual({});
    expect(await t.spans()).toEqual([]);
  });

  it('attributes given as a function are built only for a span that records', async () => {
    const built: string[] = [];
    const attributes = (ticket: string) => () => {
      built.push(ticket);
      return { 'ctxflow.ticket': ticket };
    };
    const unsampled = t.consumerTelemetry.startSpan(SPAN_STEP_CONTEXT_APPLY, attributes('T-0'), {
      parentHeaders: { [TRACEPARENT_HEADER]: PARENT.replace(/-01$/, '-00') },
    });
    const sampled = t.consumerTelemetry.startSpan(SPAN_STEP_CONTEXT_APPLY, attributes('T-1'), {
      parentHeaders: { [TRACEPARENT_HEADER]: PARENT },
    });
    unsampled.end();
    sampled.end();
    expect(built).toEqual(['T-1']);
    const spans = await t.spans();
    expect(spans.map((s) => s.attributes)).toEqual([{ 'ctxflow.ticket': 'T-1' }]);
  });

  it('the noop consumer telemetry starts spans that record nothing', () => {
    const span = noopConsumerTelemetry.startSpan('x', {}, { parentHeaders: { [TRACEPARENT_HEADER]: PARENT } });
    span.end(new Error('ignored'));
    expect(span.traceparent).toBeUndefined();
    expect(span.logFields()).toEqual({});
  });
});

describe('extractTraceContext', () => {
  it('reads every traceparent as the W3C propagator does', () => {
    const w3c = new W3CTraceContextPropagator();
    const id = '0af7651916cd43dd8448eb211c80319c';
    const span = 'b7ad6b7169203331';
    const cases: HeaderBag[] = [
      {},
      { [TRACEPARENT_HEADER]: `00-${id}-${span}-01` },
      { [TRACEPARENT_HEADER]: `00-${id}-${span}-00` },
      { [TRACEPARENT_HEADER]: `00-${id}-${span}-ff` },
      { [TRACEPARENT_HEADER]: `00-${id}-${span}-01`, [TRACESTATE_HEADER]: 'vendor=x,other=y' },
      { [TRACEPARENT_HEADER]: [`00-${id}-${span}-01`, `00-${id}-${span}-00`] },
      { [TRACEPARENT_HEADER]: ` 00-${id}-${span}-01` },
      { [TRACEPARENT_HEADER]: `00-${id}-${span}-01 ` },
      { [TRACEPARENT_HEADER]: `00-${id}-${span}-01-extra` },
      { [TRACEPARENT_HEADER]: `01-${id}-${span}-01-extra` },
      { [TRACEPARENT_HEADER]: `ff-${id}-${span}-01` },
      { [TRACEPARENT_HEADER]: `00-${id.toUpperCase()}-${span}-01` },
      { [TRACEPARENT_HEADER]: `00-${'0'.repeat(32)}-${span}-01` },
      { [TRACEPARENT_HEADER]: `00-${id}-${'0'.repeat(16)}-01` },
      { [TRACEPARENT_HEADER]: `00-${id}-${span}-1` },
      { [TRACEPARENT_HEADER]: `00_${id}-${span}-01` },
      { [TRACEPARENT_HEADER]: '' },
    ];
    for (const headers of cases) {
      const ours = trace.getSpanContext(extractTraceContext(headers));
      const theirs = trace.getSpanContext(w3c.extract(ROOT_CONTEXT, headers, defaultTextMapGetter));
      expect({ headers, spanContext: ours }).toEqual({ headers, spanContext: theirs });
    }
  });
});
