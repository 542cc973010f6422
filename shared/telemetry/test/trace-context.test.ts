/**
 * Trace context helpers and the context pass's span: W3C traceparents in
 * headers, the `ctxflow-trace-links` header, links of a pass to the updates it
 * delivered, its store commit as a child.
 */

import {
  formatTraceLinks,
  injectTraceContext,
  MAX_TRACE_LINKS,
  parseTraceLinks,
  parseTraceparent,
  traceLogFields,
  withRemoteParent,
} from '@ctxflow/telemetry';
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestTelemetry, type TestTelemetry } from '../../../test/support/telemetry.ts';

const tp = (trace: string, span: string) => `00-${trace.padStart(32, '0')}-${span.padStart(16, '0')}-01`;

describe('trace context', () => {
  let telemetry: TestTelemetry;
  const manager = new AsyncLocalStorageContextManager();
  beforeAll(() => {
    context.setGlobalContextManager(manager.enable());
  });
  afterAll(() => {
    context.disable();
  });
  beforeEach(() => {
    telemetry = createTestTelemetry();
  });
  afterEach(async () => {
    await telemetry.shutdown();
  });

  it('traceparents parse only in the version-00 form with non-zero ids', () => {
    expect(parseTraceparent(tp('a1', 'b2'))).toEqual({
      traceId: '000000000000000000000000000000a1',
      spanId: '00000000000000b2',
      traceFlags: 1,
      isRemote: true,
    });
    expect(parseTraceparent(tp('0', 'b2'))).toBeUndefined();
    expect(parseTraceparent('01-aa-bb-01')).toBeUndefined();
    expect(traceLogFields(tp('a1', 'b2'))).toEqual({
      trace_id: '000000000000000000000000000000a1',
      span_id: '00000000000000b2',
    });
    expect(traceLogFields('nonsense')).toEqual({});
  });

  it('the trace-links header keeps valid traceparents once each, at most MAX_TRACE_LINKS', () => {
    const many = Array.from({ length: MAX_TRACE_LINKS + 5 }, (_, i) => tp('c', (i + 1).toString(16)));
    const header = formatTraceLinks([tp('a', '1'), 'garbage', tp('a', '1'), ...many]);
    const parsed = parseTraceLinks(header);
    expect(parsed).toHaveLength(MAX_TRACE_LINKS);
    expect(parsed[0]).toBe(tp('a', '1'));
    expect(parsed[1]).toBe(tp('c', '1'));
    expect(parseTraceLinks(`${tp('d', '1')}, junk ,${tp('d', '2')}`)).toEqual([tp('d', '1'), tp('d', '2')]);
    expect(parseTraceLinks(null)).toEqual([]);
  });

  it('a context pass links to the traceparents it is given; its store commit is its child', async () => {
    const stepId = await telemetry.contextTelemetry.contextPass({ sessionId: 's1', mode: 'first' }, async (pass) => {
      pass.step('stp_1');
      pass.link([tp('e1', '1'), 'not a traceparent', tp('e2', '2')]);
      await telemetry.contextTelemetry.storeCommit({ sessionId: 's1', rowCount: 2 }, async () => 'ok');
      return 'stp_1';
    });
    expect(stepId).toBe('stp_1');
    const spans = await telemetry.spans();
    const pass = spans.find((s) => s.name === 'ctxflow.context_pass');
    const commit = spans.find((s) => s.name === 'ctxflow.store.commit');
    expect(pass).toMatchObject({
      attributes: { 'ctxflow.session_id': 's1', 'ctxflow.step.mode': 'first', 'ctxflow.step_id': 'stp_1' },
      parentSpanId: undefined,
      links: [
        { traceId: '000000000000000000000000000000e1', spanId: '0000000000000001' },
        { traceId: '000000000000000000000000000000e2', spanId: '0000000000000002' },
      ],
    });
    expect(commit).toMatchObject({
      traceId: pass!.traceId,
      parentSpanId: pass!.spanId,
      attributes: { 'ctxflow.row.count': 2 },
    });
  });

  it('withRemoteParent makes spans inside children of the headers’ traceparent; injectTraceContext writes the active one', async () => {
    const headers = await withRemoteParent({ traceparent: tp('f1', 'f2') }, () =>
      telemetry.contextTelemetry.withSpan('inner', {}, async (span) => {
        expect(injectTraceContext({}).traceparent).toBe(span.traceparent);
        return injectTraceContext({ other: 'kept' });
      }),
    );
    const inner = (await telemetry.spans()).find((s) => s.name === 'inner');
    expect(inner).toMatchObject({ traceId: '000000000000000000000000000000f1', parentSpanId: '00000000000000f2' });
    expect(headers).toEqual({ other: 'kept', traceparent: tp('f1', inner!.spanId) });
    // Outside any span nothing is written; an invalid traceparent leaves the current context.
    expect(injectTraceContext({})).toEqual({});
    expect(withRemoteParent({ traceparent: 'junk' }, () => injectTraceContext({}))).toEqual({});
  });
});
