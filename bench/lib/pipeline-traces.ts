/**
 * The traceparents of the S6 sides of the S1 pipeline bench: a fresh trace per record, sampled as the
 * feed-ingestor's edge sampler decides, and what the OTLP sink received as children of them.
 */
import { randomBytes } from 'node:crypto';
import type { OutgoingRecord } from '@ctxflow/bus';
import { SPAN_STEP_CONTEXT_APPLY, TRACEPARENT_HEADER } from '@ctxflow/telemetry';
import { ROOT_CONTEXT, SamplingDecision } from '@opentelemetry/api';
import type { TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace';
import type { OtlpSink } from './otlp-sink.ts';
import { meets, type ScenarioResult } from './report.ts';
import { median, round, summarize } from './stats.ts';

/** The traceparents one side's records carried, `<trace id>-<span id>`, by sampled flag. */
export interface Parents {
  sampled: Set<string>;
  unsampled: Set<string>;
}

/**
 * `record` with a `traceparent` header of a fresh trace, as the
 * feed-ingestor's publish span writes it: sampled (flag 01) always, or as
 * `sampler` decides for the fresh trace id when given (the feed-ingestor's
 * root sampler; flag 00 when not sampled). `parents` gets the parent.
 */
export function withTraceparent(
  record: OutgoingRecord,
  parents: Parents,
  sampler: TraceIdRatioBasedSampler | undefined,
): OutgoingRecord {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  const sampled =
    sampler === undefined ||
    sampler.shouldSample(ROOT_CONTEXT, traceId).decision === SamplingDecision.RECORD_AND_SAMPLED;
  (sampled ? parents.sampled : parents.unsampled).add(`${traceId}-${spanId}`);
  return {
    ...record,
    headers: { ...record.headers, [TRACEPARENT_HEADER]: `00-${traceId}-${spanId}-${sampled ? '01' : '00'}` },
  };
}

/** What an "on" side's sink received: apply spans, how many are children of a sampled or an unsampled record's traceparent. */
export function exported(sink: OtlpSink, parents: Parents) {
  const applySpans = sink.spans().filter((span) => span.name === SPAN_STEP_CONTEXT_APPLY);
  const parentOf = (span: (typeof applySpans)[number]) => `${span.traceId}-${span.parentSpanId}`;
  const requests = sink.requests();
  return {
    applySpans: applySpans.length,
    childrenOfSampled: applySpans.filter((span) => parents.sampled.has(parentOf(span))).length,
    childrenOfUnsampled: applySpans.filter((span) => parents.unsampled.has(parentOf(span))).length,
    requests: `traces ${requests['/v1/traces'] ?? 0}, metrics ${requests['/v1/metrics'] ?? 0}`,
  };
}

/** One trial of one side: updates/s and CPU ms per 1,000 updates. */
export interface TrialFigures {
  rate: number;
  consumerCpuPer1k: number;
  consumerMainCpuPer1k: number;
  producerCpuPer1k: number;
}

export interface TelemetryResultInput {
  client: string;
  /** The trials of the side with telemetry on, and of the S1 pipeline (off), trial by trial. */
  on: TrialFigures[];
  off: TrialFigures[];
  exported: ReturnType<typeof exported>;
  parents: Parents;
  /** The edge's head-sampling ratio; undefined when every record is sampled. */
  headSampling: number | undefined;
  otlpProtocol: string;
  setup: string;
}

const TELEMETRY_GOAL = { op: '>=' as const, value: 0.9 };

/** The S6 row of one telemetry side: on over off, trial by trial, and what its sink received. */
export function telemetryResult(input: TelemetryResultInput): ScenarioResult {
  const { client, on: o, off: p, exported: e, parents, headSampling: ratio } = input;
  const sampled = ratio !== undefined;
  const onOverOff = summarize(o.map((x, i) => x.rate / p[i]!.rate));
  const records = parents.sampled.size + parents.unsampled.size;
  const traceparentNote = sampled
    ? `records carry a traceparent of a fresh trace each, flag 01 where TraceIdRatioBasedSampler(${ratio}) samples its trace id, else 00 ` +
      `(the feed-ingestor with OTEL_TRACES_SAMPLER=parentbased_traceidratio, OTEL_TRACES_SAMPLER_ARG=${ratio}); off: none`
    : 'records carry a sampled traceparent (a fresh trace each, as the feed-ingestor publish span writes it); off: none';
  const cpu = (pick: (x: TrialFigures) => number, trials: TrialFigures[]) => round(median(trials.map(pick)), 1);
  return {
    id: `S6-S1-${client}${sampled ? '-sampled' : ''}`,
    title: `OpenTelemetry on${sampled ? `, ${ratio * 100}% head-sampled` : ''} over off, S1 pipeline, ${client}`,
    ratioOf: 'updates/s into feed streams with telemetry in step-context over without',
    goal: TELEMETRY_GOAL,
    ratio: onOverOff,
    met: meets(TELEMETRY_GOAL, onOverOff.median),
    cpuMsPer1k: {
      'step-context consumer on': cpu((x) => x.consumerCpuPer1k, o),
      'step-context consumer off': cpu((x) => x.consumerCpuPer1k, p),
      'step-context main thread on': cpu((x) => x.consumerMainCpuPer1k, o),
      'step-context main thread off': cpu((x) => x.consumerMainCpuPer1k, p),
      'producer on': cpu((x) => x.producerCpuPer1k, o),
      'producer off': cpu((x) => x.producerCpuPer1k, p),
    },
    figures: {
      'on updates/s': Math.round(median(o.map((x) => x.rate))),
      'off updates/s': Math.round(median(p.map((x) => x.rate))),
      // Less sensitive to other load on the machine: the ratio if step-context's CPU were the only limit.
      'step-context CPU ratio': round(median(p.map((x, i) => x.consumerCpuPer1k / o[i]!.consumerCpuPer1k)), 2),
      ...(sampled ? { 'records with a sampled traceparent': `${parents.sampled.size} of ${records}` } : {}),
      'apply spans exported': e.applySpans,
      'children of their record traceparent': `${e.childrenOfSampled} of ${parents.sampled.size} ${sampled ? 'sampled ' : ''}records`,
      ...(sampled ? { 'apply spans of unsampled records': e.childrenOfUnsampled } : {}),
      'OTLP export requests': e.requests,
    },
    notes: [
      input.setup,
      'same trials as S1, sides interleaved (sampled, on, off, raw; reversed every other trial)',
      'on: startTelemetry + createConsumerTelemetry as in services/step-context main (no instrumentation hook, as in production), ' +
        `${sampled ? `parentbased_traceidratio ${ratio}` : 'parentbased_always_on'}, OTLP ${input.otlpProtocol} (the deployment's protocol) to a local sink answering 200, metrics every 5 s; ` +
        traceparentNote,
      'consumer CPU is the whole process (V8 and libuv threads too), main thread its event loop; ' +
        'on CPU includes a span flush after each trial (outside the rate timing), so it covers exporting every span; ' +
        'producer on includes the local OTLP sink, which runs in the producer process',
    ],
  };
}
