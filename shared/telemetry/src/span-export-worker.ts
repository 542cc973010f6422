/**
 * The worker thread behind WorkerBatchSpanProcessor (worker-span-processor.ts):
 * it unpacks the spans the service's thread posts (span-codec.ts) into the
 * fields the OTLP serializers read, and runs the SDK's BatchSpanProcessor
 * with the SDK's OTLP trace exporter for the configured protocol on them:
 * the batching, HTTP transport, retries and timeouts are the SDK's, here
 * instead of on the service's thread; the JSON encoding is the SDK's output
 * written by fastJsonTraceSerializer.
 *
 * In: `spans` (a chunk, with the strings, resources and scopes new to this
 * worker), `flush` and `shutdown` (each answered `done`). Out: `done`, and
 * `busy` when an export starts being or stops being in flight.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { InstrumentationScope } from '@opentelemetry/core';
import { OTLPTraceExporter as ProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPExporterBase } from '@opentelemetry/otlp-exporter-base';
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from '@opentelemetry/otlp-exporter-base/node-http';
import { TraceExporterMetricsHelper } from '@opentelemetry/otlp-transformer';
import { BatchSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace';
import { fastJsonTraceSerializer } from './otlp-json-spans.ts';
import { decodeSpans } from './span-codec.ts';
import type { FromWorker, PlainError, PlainResource, SpanExportTarget, ToWorker } from './worker-span-processor.ts';

const port = parentPort;
if (!port) throw new Error('span-export-worker runs as a worker thread');
const target = workerData as SpanExportTarget;

function reply(message: FromWorker): void {
  port!.postMessage(message);
}

/**
 * http/json: the SDK's OTLPTraceExporter, built as its constructor builds it
 * (same transport, retries, timeouts, headers and compression from the
 * environment) but with fastJsonTraceSerializer, which writes the SDK
 * serializer's bytes for less CPU. http/protobuf: the SDK's exporter.
 */
const otlp: SpanExporter =
  target.protocol === 'http/json'
    ? (new OTLPExporterBase(
        createOtlpHttpExportDelegate(
          convertLegacyHttpOptions({ url: target.url }, 'TRACES', 'v1/traces', { 'Content-Type': 'application/json' }),
          fastJsonTraceSerializer,
          'otlp_http_span_exporter',
          TraceExporterMetricsHelper,
          undefined,
        ),
      ) as SpanExporter)
    : new ProtoTraceExporter({ url: target.url });
/** The OTLP exporter, telling the main thread when exports are in flight (it keeps the process open meanwhile). */
let inFlight = 0;
const exporter: SpanExporter = {
  export(spans, resultCallback) {
    if (inFlight++ === 0) reply({ type: 'busy', busy: true });
    otlp.export(spans, (result) => {
      if (--inFlight === 0) reply({ type: 'busy', busy: false });
      resultCallback(result);
    });
  },
  shutdown: () => otlp.shutdown(),
  forceFlush: () => otlp.forceFlush?.() ?? Promise.resolve(),
};
const processor = new BatchSpanProcessor({ exporter });

/** Resources and scopes by the id the main thread gave them: one object each (the serializers group spans by resource). */
const resources = new Map<number, PlainResource>();
const scopes = new Map<number, InstrumentationScope>();
/** Span names and attribute keys, by index. */
const strings: string[] = [];
const resourceOf = (id: number) => resources.get(id) as unknown as ReadableSpan['resource'];
const scopeOf = (id: number) => scopes.get(id)!;

/** An error as plain data (an exporter's error may carry fields a message cannot clone). */
function plainError(err: unknown): PlainError {
  return err instanceof Error ? { name: err.name, message: err.message } : { name: 'Error', message: String(err) };
}

port.on('message', (message: ToWorker) => {
  if (message.type === 'spans') {
    if (message.strings) strings.push(...message.strings);
    for (const [id, resource] of message.resources ?? []) resources.set(id, resource);
    for (const [id, scope] of message.scopes ?? []) scopes.set(id, scope);
    for (const span of decodeSpans(message.chunk, strings, resourceOf, scopeOf)) processor.onEnd(span);
    return;
  }
  const { id } = message;
  (message.type === 'flush' ? processor.forceFlush() : processor.shutdown()).then(
    () => reply({ type: 'done', id }),
    (err: unknown) => reply({ type: 'done', id, error: plainError(err) }),
  );
});
