/**
 * WorkerBatchSpanProcessor: the spans it exports from its worker thread are
 * the bytes the SDK's BatchSpanProcessor and OTLP exporter send from the
 * calling thread, for http/json and http/protobuf, whatever a span carries
 * (remote and local parents, trace state, links, events, an error status,
 * every attribute type, non-ASCII text, several resources' worth of scopes).
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace } from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, type SpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it } from 'vitest';
import { WorkerBatchSpanProcessor } from '../../shared/telemetry/src/worker-span-processor.ts';

interface Collector {
  url: string;
  /** Trace request bodies received, in order. */
  bodies: Buffer[];
  status: number;
}

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.close();
    await once(server, 'close');
  }
});

async function collector(status = 200): Promise<Collector> {
  const state: Collector = { url: '', bodies: [], status };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      state.bodies.push(Buffer.concat(chunks));
      const json = req.headers['content-type'] === 'application/json';
      res.writeHead(state.status, { 'content-type': json ? 'application/json' : 'application/x-protobuf' });
      res.end(json ? '{}' : '');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  servers.push(server);
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`;
  return state;
}

const REMOTE = {
  traceId: '0af7651916cd43dd8448eb211c80319c',
  spanId: 'b7ad6b7169203331',
  traceFlags: TraceFlags.SAMPLED,
  isRemote: true,
  traceState: new TraceState('vendor=a,other=b'),
};

/** Spans of every shape through `processors` (each gets every span); some end unsampled. */
function makeSpans(processors: SpanProcessor[]): void {
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'ctxflow-test', 'deployment.environment': 'tëst' }),
    spanProcessors: processors,
  });
  const tracer = provider.getTracer('ctxflow');
  const other = provider.getTracer('other-scope', '1.2.3', { schemaUrl: 'https://opentelemetry.io/schemas/1.30.0' });
  const remote = trace.setSpanContext(ROOT_CONTEXT, REMOTE);

  const parent = tracer.startSpan('ctxflow.context_pass', {
    kind: SpanKind.SERVER,
    attributes: {
      'ctxflow.session_id': 'ses_1',
      int: 42,
      negative: -7,
      double: 0.25,
      big: 2 ** 40,
      yes: true,
      no: false,
      strings: ['a', 'é', '"quoted"'],
      numbers: [1, 2.5, -3],
      booleans: [true, false],
      unicode: 'naïve — 日本語 🚀 \u0000 \n "q" \\',
      long: 'x'.repeat(300) + 'ü'.repeat(300),
    },
    links: [
      { context: REMOTE, attributes: { why: 'fan-in', n: 2 } },
      { context: { traceId: '1'.repeat(32), spanId: '2'.repeat(16), traceFlags: 0 } },
    ],
  });
  const child = tracer.startSpan('ctxflow.store.commit', {}, trace.setSpan(ROOT_CONTEXT, parent));
  child.addEvent('retry', { attempt: 2, reason: 'conflict' });
  child.recordException(new TypeError('no such row'));
  child.setStatus({ code: SpanStatusCode.ERROR, message: 'no such row' });
  child.end();
  parent.setStatus({ code: SpanStatusCode.OK });
  parent.end();

  for (let i = 0; i < 40; i++) {
    const apply = tracer.startSpan('ctxflow.step_context.apply', { kind: SpanKind.CONSUMER }, remote);
    apply.setAttributes({ 'messaging.destination.partition.id': i % 3, 'ctxflow.ticket': `PROJ-${i}` });
    apply.end();
  }
  other.startSpan('other', { kind: SpanKind.PRODUCER, root: true }).end();
  // Unsampled: neither processor exports it.
  const unsampled = { ...REMOTE, traceFlags: TraceFlags.NONE };
  tracer.startSpan('unsampled', {}, trace.setSpanContext(ROOT_CONTEXT, unsampled)).end();
}

describe('WorkerBatchSpanProcessor', () => {
  for (const protocol of ['http/json', 'http/protobuf'] as const) {
    it(`sends the bytes the SDK's BatchSpanProcessor sends (${protocol})`, async () => {
      const sdk = await collector();
      const worker = await collector();
      const Exporter = protocol === 'http/json' ? JsonTraceExporter : ProtoTraceExporter;
      const reference = new BatchSpanProcessor({ exporter: new Exporter({ url: sdk.url }) });
      const processor = new WorkerBatchSpanProcessor({ url: worker.url, protocol });
      makeSpans([reference, processor]);
      await Promise.all([reference.forceFlush(), processor.forceFlush()]);

      expect(sdk.bodies).toHaveLength(1);
      expect(worker.bodies).toHaveLength(1);
      expect(worker.bodies[0]!.equals(sdk.bodies[0]!)).toBe(true);
      if (protocol === 'http/json') {
        const spans = JSON.parse(worker.bodies[0]!.toString('utf8')).resourceSpans[0].scopeSpans.flatMap(
          (s: { spans: unknown[] }) => s.spans,
        );
        expect(spans).toHaveLength(43);
      }
      await Promise.all([reference.shutdown(), processor.shutdown()]);
    });
  }

  it('shutdown exports the spans that ended before it, then ends the worker; spans after it are dropped', async () => {
    const sink = await collector();
    const processor = new WorkerBatchSpanProcessor({ url: sink.url, protocol: 'http/json' });
    const provider = new TracerProvider({ spanProcessors: [processor] });
    const tracer = provider.getTracer('ctxflow');
    for (let i = 0; i < 600; i++) tracer.startSpan(`span-${i}`).end();
    await provider.shutdown();
    tracer.startSpan('after-shutdown').end();
    await processor.shutdown();

    const names = sink.bodies.flatMap((body) =>
      JSON.parse(body.toString('utf8')).resourceSpans.flatMap((r: { scopeSpans: { spans: { name: string }[] }[] }) =>
        r.scopeSpans.flatMap((s) => s.spans.map((span) => span.name)),
      ),
    );
    expect(names).toHaveLength(600);
    expect(new Set(names).size).toBe(600);
    expect(names).not.toContain('after-shutdown');
  });

  it('forceFlush fails as the SDK processor fails when the collector refuses the spans', async () => {
    const refusing = await collector(400);
    const sdk = new BatchSpanProcessor({ exporter: new JsonTraceExporter({ url: refusing.url }) });
    const processor = new WorkerBatchSpanProcessor({ url: refusing.url, protocol: 'http/json' });
    makeSpans([sdk, processor]);
    const [expected, actual] = await Promise.allSettled([sdk.forceFlush(), processor.forceFlush()]);
    expect(expected.status).toBe('rejected');
    expect(actual.status).toBe('rejected');
    expect((actual as PromiseRejectedResult).reason.message).toBe((expected as PromiseRejectedResult).reason.message);
    await Promise.all([sdk.shutdown(), processor.shutdown()]);
  });
});
