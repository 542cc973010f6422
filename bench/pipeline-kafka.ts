/**
 * S1 pipeline on Kafka and Redis, for each Kafka client:
 * - throughput: ticket updates per second from a producer (publish calls of
 *   100 records, awaited: acks=all) through step-context into session batch
 *   streams (Redis), over raw produce-then-consume of the same records with
 *   the same client and settings into a handler that only counts;
 * - latency: one update at a time, from the publish call (the webhook answers
 *   202 when it resolves, so this start is earlier than "accepted") until the
 *   row is in the session's feed stream, over raw produce-to-consume.
 * The consumers are child processes (pipeline-child.ts) that joined their
 * groups before any timing; the producer is this process.
 *
 * With `telemetry` (S6, OpenTelemetry on over off), a third consumer process
 * runs the same step-context pipeline with telemetry started as
 * services/step-context's main starts it: `startTelemetry` first, then
 * `createConsumerTelemetry()` for the service, so one CONSUMER apply span per
 * record, child of the record's `traceparent`, and the consumer-lag gauge.
 * Production registers no instrumentation hook (no kafkajs or ioredis
 * auto-instrumentation), so neither does this. Its records carry a sampled
 * `traceparent` header, as the feed-ingestor's publish span puts one in every
 * record (a fresh trace per record, made before the timing); the "off" side is
 * the S1 pipeline above, whose records carry none, as with telemetry off
 * everywhere.
 *
 * A fourth consumer process, "sampled" (rows S6-S1-<client>-sampled), is the
 * "on" process with head sampling as a deployment sets it at the edge:
 * OTEL_TRACES_SAMPLER=parentbased_traceidratio, OTEL_TRACES_SAMPLER_ARG=0.1.
 * The feed-ingestor's webhook span is a root there, so its trace-id ratio
 * sampler decides, and the publish span and the record's `traceparent` follow:
 * flag 01 for about 10% of records, 00 for the rest. Its records carry
 * traceparents decided that way (the SDK's TraceIdRatioBasedSampler(0.1) on
 * each fresh trace id). step-context's parent-based sampler follows the
 * record's flag: an apply span for a sampled record, a non-recording one
 * (never exported, no traceparent stored) for the rest; the process gets the
 * same sampler variables, which only matter for a record without a parent.
 * The four sides are interleaved in the same trials: sampled, on, off, raw
 * (reversed every other trial), so "on" is next to "off" and "off" next to
 * "raw" as before.
 *
 * Export: the "on" and "sampled" processes are configured as the
 * deployment's configuration does (OTEL_EXPORTER_OTLP_ENDPOINT, http/json as
 * docker-compose.yml and deploy/kubernetes/config.yaml set it; "on" with the
 * default parentbased_always_on sampler, so every record's span is sampled),
 * each with its endpoint a local OTLP receiver in this process (lib/otlp-sink.ts) that
 * answers 200 at once, as S3's "on" server does: no collector runs here, and
 * an endpoint that refuses connections would measure failed exports and their
 * retries instead of the work production does. Metrics export every 5 s (S3's
 * setting; the default is 60 s). The sink keeps the trace bodies: after the
 * trials the bench decodes them and reports how many apply spans arrived as
 * children of the traceparent their record carried (spans the SDK dropped
 * would show there) and, for "sampled", how many came from a record whose
 * traceparent was not sampled (there should be none). Export runs in the
 * background (the BatchSpanProcessor, SPAN_BATCH), so a trial's last spans would
 * leave after it ends: the "on" and "sampled" processes flush after each
 * trial, outside the rate timing but inside their CPU figure, so CPU ms per
 * 1k covers exporting every span.
 */
import { randomUUID } from 'node:crypto';
import { type Bus, createBus, type KafkaClientName, type OutgoingRecord } from '@ctxflow/bus';
import { DEFAULT_TENANT, type TicketUpdate, ticketKey } from '@ctxflow/contracts';
import { RECORD_ID_HEADER } from '@ctxflow/step-context';
import { RedisSubscriptionStore } from '@ctxflow/subscriptions';
import { TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace';
import { Redis } from 'ioredis';
import { cpuMs, perThousand } from './lib/cpu.ts';
import { type OtlpSink, startOtlpSink } from './lib/otlp-sink.ts';
import { type Consumer, startConsumer } from './lib/pipeline-consumer.ts';
import { exported, type Parents, type TrialFigures, telemetryResult, withTraceparent } from './lib/pipeline-traces.ts';
import { progress } from './lib/progress.ts';
import { meets, type ScenarioResult } from './lib/report.ts';
import { median, quantile, round, summarize } from './lib/stats.ts';

export interface PipelineOptions {
  brokers: string[];
  redisUrl: string;
  clients: KafkaClientName[];
  trials: number;
  /** Updates per throughput run. */
  records: number;
  /** Updates sent one at a time for latency. */
  latencySamples: number;
  /** Also measure the pipeline with OpenTelemetry on (S6), interleaved with the same trials. */
  telemetry?: boolean;
  /**
   * Extra node flags for the consumer processes (e.g. --cpu-prof: each side's profiles, one per thread,
   * go to a folder of its own under the --cpu-prof-dir given).
   */
  consumerExecArgv?: string[];
}

const PARTITIONS = 3;
const PUBLISH_BATCH = 100;
const TICKETS = 100;
/** OTEL_EXPORTER_OTLP_PROTOCOL as docker-compose.yml and deploy/kubernetes/config.yaml set it. */
const DEPLOYED_OTLP_PROTOCOL = 'http/json';
/** OTEL_TRACES_SAMPLER_ARG of the "sampled" side (parentbased_traceidratio at the edge). */
const HEAD_SAMPLING_RATIO = 0.1;
const SUMMARY =
  'Customer replied: the checkout still fails for carts over 50 items after the last deploy; attaching a HAR file.';

let updateNo = 0;
const baseMs = Date.now();
/** A valid TicketUpdate as feed-ingestor publishes it; occurredAt grows, so none is stale. */
function updateRecord(runId: string): OutgoingRecord {
  updateNo += 1;
  const eventId = `${runId}-${updateNo}`;
  const update: TicketUpdate = {
    id: `generic:${eventId}`,
    source: 'generic',
    ticket: `PROJ-${updateNo % TICKETS}`,
    eventId,
    kind: 'commented',
    summary: SUMMARY,
    occurredAt: new Date(baseMs + updateNo).toISOString(),
    receivedAt: new Date(baseMs + updateNo).toISOString(),
  };
  return { key: ticketKey(update), value: JSON.stringify(update), headers: { [RECORD_ID_HEADER]: update.id } };
}

async function publishAll(bus: Bus, topic: string, records: OutgoingRecord[]): Promise<void> {
  for (let i = 0; i < records.length; i += PUBLISH_BATCH) {
    await bus.publisher.publish(topic, records.slice(i, i + PUBLISH_BATCH));
  }
}

async function deleteByPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}

async function runClient(client: KafkaClientName, options: PipelineOptions): Promise<ScenarioResult[]> {
  const run = randomUUID().slice(0, 8);
  const prefix = `ctxflow-bench-s1-${run}`;
  const topics = {
    pipeline: `ctxflow-bench.s1.${client}.${run}.updates`,
    raw: `ctxflow-bench.s1.${client}.${run}.raw`,
    ...(options.telemetry
      ? { otel: `ctxflow-bench.s6.${client}.${run}.updates`, sampled: `ctxflow-bench.s6.${client}.${run}.sampled` }
      : {}),
  };
  const redis = new Redis(options.redisUrl);
  const bus = createBus({ brokers: options.brokers, client, clientId: `ctxflow-bench-producer-${client}` });
  const consumers: Consumer[] = [];
  const sinks: OtlpSink[] = [];
  try {
    await bus.admin.ensureTopics(Object.values(topics).map((name) => ({ name, partitions: PARTITIONS })));
    // One session per ticket: every update lands in exactly one feed stream.
    const subscriptions = new RedisSubscriptionStore({ redis, prefix });
    for (let t = 0; t < TICKETS; t++) {
      await subscriptions.subscribe(DEFAULT_TENANT, `ses_bench_${t}`, { source: 'generic', ticket: `PROJ-${t}` });
    }
    const common = {
      KAFKA_BROKERS: options.brokers.join(','),
      BENCH_CLIENT: client,
      REDIS_URL: options.redisUrl,
      BENCH_PREFIX: prefix,
    };
    /** The consumer flags; when profiling, each side's profiles (one per thread) in `<dir>/s1-<client>-<run>-<side>`. */
    const execArgv = (side: string) =>
      (options.consumerExecArgv ?? []).map((a) =>
        a.startsWith('--cpu-prof-dir=') ? `${a}/s1-${client}-${run}-${side}` : a,
      );
    progress(
      `S1 ${client}: starting the step-context${options.telemetry ? ', step-context with OpenTelemetry (all sampled; head-sampled)' : ''} and raw consumers (group joins, not timed)`,
    );
    const pipeline = await startConsumer(
      {
        ...common,
        BENCH_MODE: 'step-context',
        BENCH_TOPIC: topics.pipeline,
        BENCH_GROUP: `${topics.pipeline}.step-context`,
      },
      execArgv('off'),
    );
    consumers.push(pipeline);
    const raw = await startConsumer(
      {
        ...common,
        BENCH_MODE: 'raw',
        BENCH_TOPIC: topics.raw,
        BENCH_GROUP: `${topics.raw}.raw`,
      },
      execArgv('raw'),
    );
    consumers.push(raw);
    interface Side {
      name: string;
      consumer: Consumer;
      topic: string;
      total: number;
      /** Telemetry on: the records' traceparents, the sink the process exports to, the edge's sampler if any. */
      traced?: { parents: Parents; sink: OtlpSink; sampler: TraceIdRatioBasedSampler | undefined };
    }
    const sides: Side[] = [
      { name: 'pipeline', consumer: pipeline, topic: topics.pipeline, total: 0 },
      { name: 'raw', consumer: raw, topic: topics.raw, total: 0 },
    ];
    /** A step-context consumer with telemetry on, exporting to a sink of its own; `sampler` the OTEL_TRACES_SAMPLER* pair. */
    const telemetrySide = async (
      name: string,
      label: string,
      topic: string,
      sampler: Record<string, string>,
      ratio?: number,
    ) => {
      const sink = await startOtlpSink();
      sinks.push(sink);
      const consumer = await startConsumer(
        {
          ...common,
          BENCH_MODE: 'step-context',
          BENCH_TOPIC: topic,
          BENCH_GROUP: `${topic}.step-context`,
          BENCH_TELEMETRY: '1',
          OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
          OTEL_EXPORTER_OTLP_PROTOCOL: DEPLOYED_OTLP_PROTOCOL,
          ...sampler,
          OTEL_METRIC_EXPORT_INTERVAL: '5000',
        },
        execArgv(label),
      );
      consumers.push(consumer);
      const parents: Parents = { sampled: new Set(), unsampled: new Set() };
      const edge = ratio === undefined ? undefined : new TraceIdRatioBasedSampler(ratio);
      return { name, consumer, topic, total: 0, traced: { parents, sink, sampler: edge } };
    };
    if (topics.otel && topics.sampled) {
      const on = await telemetrySide('pipeline, OpenTelemetry on', 'on', topics.otel, {
        OTEL_TRACES_SAMPLER: 'parentbased_always_on',
      });
      const sampled = await telemetrySide(
        'pipeline, OpenTelemetry on, head-sampled',
        'sampled',
        topics.sampled,
        { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: String(HEAD_SAMPLING_RATIO) },
        HEAD_SAMPLING_RATIO,
      );
      // sampled, on, off, raw: every trial runs "on" right next to "off" (the S1 pipeline), and "off" next to "raw".
      sides.unshift(sampled, on);
    }

    const throughput = async (side: (typeof sides)[number], count: number): Promise<TrialFigures> => {
      const records = Array.from({ length: count }, () =>
        side.traced ? withTraceparent(updateRecord(run), side.traced.parents, side.traced.sampler) : updateRecord(run),
      );
      side.total += count;
      const reached = side.consumer.expect(side.total);
      const childCpu = await side.consumer.cpuMs();
      const cpu = process.cpuUsage();
      const start = performance.now();
      await publishAll(bus, side.topic, records);
      const producerMs = cpuMs(cpu);
      await reached;
      const elapsed = performance.now() - start;
      if (side.traced) await side.consumer.flush();
      const childCpuAfter = await side.consumer.cpuMs();
      return {
        rate: count / (elapsed / 1000),
        consumerCpuPer1k: perThousand(childCpuAfter.process - childCpu.process, count),
        consumerMainCpuPer1k: perThousand(childCpuAfter.main - childCpu.main, count),
        producerCpuPer1k: perThousand(producerMs, count),
      };
    };

    // Warm-up: JIT, connections, partition leaders, Redis scripts.
    for (const side of sides) await throughput(side, Math.min(1000, options.records));

    const rates = new Map<string, TrialFigures[]>(sides.map((s) => [s.name, []]));
    for (let trial = 0; trial < options.trials; trial++) {
      const order = trial % 2 === 0 ? sides : [...sides].reverse();
      for (const side of order) {
        const r = await throughput(side, options.records);
        rates.get(side.name)!.push(r);
        progress(
          `S1 ${client} trial ${trial + 1}/${options.trials} ${side.name}: ${Math.round(r.rate)} updates/s, ` +
            `consumer ${r.consumerCpuPer1k.toFixed(0)} CPU ms/1k (main thread ${r.consumerMainCpuPer1k.toFixed(0)}), producer ${r.producerCpuPer1k.toFixed(0)} CPU ms/1k`,
        );
      }
    }

    // What the "on" processes exported during the trials (all flushed by now): decoded outside any timing.
    const exports = new Map<string, ReturnType<typeof exported>>();
    for (const side of sides) if (side.traced) exports.set(side.name, exported(side.traced.sink, side.traced.parents));

    // Latency: one update at a time, alternating the S1 sides.
    const latencySides = sides.filter((side) => !side.traced);
    const latencies = new Map<string, number[]>(latencySides.map((s) => [s.name, []]));
    for (const side of latencySides) side.consumer.child.send({ type: 'trace', on: true });
    for (let i = 0; i < options.latencySamples; i++) {
      for (const side of i % 2 === 0 ? latencySides : [...latencySides].reverse()) {
        const record = updateRecord(run);
        const id = record.headers![RECORD_ID_HEADER]!;
        side.total += 1;
        const seen = new Promise<number>((resolve) => {
          const onMessage = (m: { type: string; id?: string }) => {
            if (m.type !== 'seen' || m.id !== id) return;
            side.consumer.child.off('message', onMessage);
            resolve(performance.now());
          };
          side.consumer.child.on('message', onMessage);
        });
        const start = performance.now();
        await bus.publisher.publish(side.topic, [record]);
        latencies.get(side.name)!.push((await seen) - start);
      }
    }
    for (const side of latencySides) side.consumer.child.send({ type: 'trace', on: false });

    const p = rates.get('pipeline')!;
    const r = rates.get('raw')!;
    const ratio = summarize(p.map((x, i) => x.rate / r[i]!.rate));
    const lp = latencies.get('pipeline')!;
    const lr = latencies.get('raw')!;
    const latencyTrials = [median(lp) / median(lr)];
    const setup = `${options.trials} trials x ${options.records} updates, ${PARTITIONS} partitions, publish calls of ${PUBLISH_BATCH} (acks=all), ${TICKETS} tickets each subscribed by one session`;
    const cpu = {
      'step-context consumer': round(median(p.map((x) => x.consumerCpuPer1k)), 1),
      'raw consumer': round(median(r.map((x) => x.consumerCpuPer1k)), 1),
      producer: round(median(p.map((x) => x.producerCpuPer1k)), 1),
    };
    const throughputGoal = { op: '>=' as const, value: 0.5 };
    const latencyGoal = { op: '<=' as const, value: 3 };
    // "on" first, then "sampled".
    const telemetryResults = sides
      .filter((side) => side.traced)
      .sort((a, b) => (a.traced!.sampler ? 1 : 0) - (b.traced!.sampler ? 1 : 0))
      .map((side) =>
        telemetryResult({
          client,
          on: rates.get(side.name)!,
          off: p,
          exported: exports.get(side.name)!,
          parents: side.traced!.parents,
          headSampling: side.traced!.sampler ? HEAD_SAMPLING_RATIO : undefined,
          otlpProtocol: DEPLOYED_OTLP_PROTOCOL,
          setup,
        }),
      );
    return [
      {
        id: `S1-${client}`,
        title: `Pipeline throughput, ${client}`,
        ratioOf: 'updates/s into feed streams over raw produce-then-consume',
        goal: throughputGoal,
        ratio,
        met: meets(throughputGoal, ratio.median),
        cpuMsPer1k: cpu,
        figures: {
          'pipeline updates/s': Math.round(median(p.map((x) => x.rate))),
          'raw updates/s': Math.round(median(r.map((x) => x.rate))),
        },
        notes: [setup],
      },
      {
        id: `E2E-${client}`,
        title: `Latency update -> row available, ${client}`,
        ratioOf: 'p50 publish -> in feed stream over p50 raw produce -> consume',
        goal: latencyGoal,
        ratio: summarize(latencyTrials),
        met: meets(latencyGoal, latencyTrials[0]!),
        cpuMsPer1k: {},
        figures: {
          'pipeline p50 ms': round(median(lp), 2),
          'pipeline p99 ms': round(quantile(lp, 0.99), 2),
          'raw p50 ms': round(median(lr), 2),
          'raw p99 ms': round(quantile(lr, 0.99), 2),
          'p99 ratio': round(quantile(lp, 0.99) / quantile(lr, 0.99), 2),
        },
        notes: [`${options.latencySamples} updates per side, one at a time, sides alternating`],
      },
      ...telemetryResults,
    ];
  } finally {
    await Promise.allSettled(consumers.map((c) => c.stop()));
    await Promise.allSettled([bus.publisher.close(), bus.admin.close(), ...sinks.map((sink) => sink.close())]);
    await deleteByPrefix(redis, prefix);
    redis.disconnect();
  }
}

export async function runPipeline(options: PipelineOptions): Promise<ScenarioResult[]> {
  const results: ScenarioResult[] = [];
  for (const client of options.clients) results.push(...(await runClient(client, options)));
  return results;
}
