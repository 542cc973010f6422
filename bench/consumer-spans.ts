/**
 * Consumer spans, per record or per fetched batch (run by hand):
 *
 *   OTEL_TRACES_SAMPLER_ARG=0.1 node bench/consumer-spans.ts
 *
 * OpenTelemetry's messaging conventions allow either a CONSUMER span per
 * record, child of the record's creation context (what step-context makes), or
 * one span per fetched batch with a link to each record's context. This
 * measures what each costs step-context's process, CPU ms per 1,000 records,
 * including the export of every span (BatchSpanProcessor and the OTLP http/json
 * exporter to a sink in a child process, as the S6-S1 rows configure it):
 * - `record`: ConsumerTelemetry.startSpan per record (attributes only for a
 *   sampled one), all ended after the run, as StepContextService does;
 * - `batch`: one span per run of 200 records (a root: its sampler decides) with
 *   a link per record (the SDK keeps at most 128 links per span by default);
 * - `none`: the same loop without telemetry (subtracted from both).
 * Records carry a traceparent of a fresh trace each, flag 01 where
 * TraceIdRatioBasedSampler(OTEL_TRACES_SAMPLER_ARG) samples it, as the
 * feed-ingestor's publish span writes it under parentbased_traceidratio.
 */
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createConsumerTelemetry } from '@ctxflow/step-context';
import {
  INSTRUMENTATION_SCOPE,
  parseTraceparent,
  SPAN_STEP_CONTEXT_APPLY,
  startTelemetry,
  TRACEPARENT_HEADER,
} from '@ctxflow/telemetry';
import { type Link, ROOT_CONTEXT, SamplingDecision, SpanKind, trace } from '@opentelemetry/api';
import { TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace';
import { cpuMs } from './lib/cpu.ts';
import { startOtlpSink } from './lib/otlp-sink.ts';

if (process.argv[2] === 'sink') {
  const sink = await startOtlpSink();
  process.send?.({ url: sink.url });
  process.on('message', () => process.send?.({ spans: sink.spans().length }));
} else {
  const RECORDS = 20_000;
  const RUN = 200;
  const TRIALS = 5;
  const ratio = Number(process.env.OTEL_TRACES_SAMPLER_ARG ?? '1');

  const child = fork(new URL(import.meta.url), ['sink'], { stdio: 'inherit' });
  const url = await new Promise<string>((resolve) => child.once('message', (m: { url: string }) => resolve(m.url)));
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = url;
  process.env.OTEL_EXPORTER_OTLP_PROTOCOL = 'http/json';
  process.env.OTEL_TRACES_SAMPLER = 'parentbased_traceidratio';
  process.env.OTEL_TRACES_SAMPLER_ARG = String(ratio);
  const running = startTelemetry({ serviceName: 'ctxflow-bench-consumer-spans' });
  const consumer = createConsumerTelemetry();
  const tracer = trace.getTracer(INSTRUMENTATION_SCOPE);
  const provider = (
    trace.getTracerProvider() as unknown as { getDelegate(): { forceFlush(): Promise<void> } }
  ).getDelegate();

  const edge = new TraceIdRatioBasedSampler(ratio);
  const records = Array.from({ length: RECORDS }, (_, i) => {
    const traceId = randomBytes(16).toString('hex');
    const sampled = edge.shouldSample(ROOT_CONTEXT, traceId).decision === SamplingDecision.RECORD_AND_SAMPLED;
    return {
      headers: { [TRACEPARENT_HEADER]: `00-${traceId}-${randomBytes(8).toString('hex')}-${sampled ? '01' : '00'}` },
      ticket: `T-${i % 100}`,
      id: `u-${i}`,
    };
  });
  const stored: (string | undefined)[] = new Array(RECORDS);

  const variants: Record<string, (run: typeof records, offset: number) => void> = {
    none(run, offset) {
      for (let i = 0; i < run.length; i++) stored[offset + i] = undefined;
    },
    record(run, offset) {
      const spans = run.map((r) =>
        consumer.startSpan(
          SPAN_STEP_CONTEXT_APPLY,
          () => ({ 'ctxflow.ticket': r.ticket, 'ctxflow.feed.event_id': r.id, 'ctxflow.partition': 0 }),
          { kind: 'consumer', parentHeaders: r.headers },
        ),
      );
      for (let i = 0; i < spans.length; i++) stored[offset + i] = spans[i]!.traceparent;
      for (const span of spans) span.end();
    },
    batch(run, offset) {
      const links: Link[] = [];
      for (const r of run) {
        const context = parseTraceparent(r.headers[TRACEPARENT_HEADER]);
        if (context) links.push({ context });
      }
      const span = tracer.startSpan(
        SPAN_STEP_CONTEXT_APPLY,
        { kind: SpanKind.CONSUMER, links, attributes: { 'messaging.batch.message_count': run.length } },
        ROOT_CONTEXT,
      );
      // Each entry stores the record's own traceparent: the runner's delivery spans join the webhook's trace.
      for (let i = 0; i < run.length; i++) stored[offset + i] = run[i]!.headers[TRACEPARENT_HEADER];
      span.end();
    },
  };

  const cpu: Record<string, number[]> = { none: [], record: [], batch: [] };
  for (let trial = -1; trial < TRIALS; trial++) {
    const order = trial % 2 === 0 ? ['none', 'record', 'batch'] : ['batch', 'record', 'none'];
    for (const name of order) {
      const before = process.cpuUsage();
      for (let offset = 0; offset < RECORDS; offset += RUN)
        variants[name]!(records.slice(offset, offset + RUN), offset);
      await provider.forceFlush();
      if (trial >= 0) cpu[name]!.push((cpuMs(before) / RECORDS) * 1000);
    }
  }
  await running.shutdown();
  const spans = await new Promise<number>((resolve) => {
    child.once('message', (m: { spans: number }) => resolve(m.spans));
    child.send('count');
  });
  child.kill();

  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const none = median(cpu.none!);
  const sampled = records.filter((r) => r.headers[TRACEPARENT_HEADER].endsWith('-01')).length;
  console.log(
    JSON.stringify(
      {
        ratio,
        records: RECORDS,
        run: RUN,
        trials: TRIALS,
        'sampled records': sampled,
        'spans exported (all trials, warm-up included)': spans,
        'CPU ms per 1k records, median (min-max), loop without telemetry subtracted': Object.fromEntries(
          ['record', 'batch'].map((name) => [
            name,
            `${(median(cpu[name]!) - none).toFixed(1)} (${(Math.min(...cpu[name]!) - none).toFixed(1)}-${(Math.max(...cpu[name]!) - none).toFixed(1)})`,
          ]),
        ),
        'loop without telemetry': none.toFixed(1),
      },
      null,
      2,
    ),
  );
}
