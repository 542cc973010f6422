/**
 * S1 pipeline on Kafka and Redis, for each Kafka client:
 * - throughput: ticket updates per second from a producer (publish calls of
 *   100 records, awaited: acks=all) through step-context into session batch
 *   streams (Redis), over raw produce-then-consume of the same records with
 *   the same client and settings into a handler that only counts;
 * - latency: one update at a time, from the publish call (the webhook answers
 *   202 when it resolves, so this start is earlier than "accepted") until the
 *   row is in the session's batch stream, over raw produce-to-consume.
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
 * everywhere. The three sides are interleaved in the same trials, "on" next to
 * "off".
 *
 * Export: the "on" process is configured as the deployment's configuration
 * does (OTEL_EXPORTER_OTLP_ENDPOINT, http/protobuf, the default
 * parentbased_always_on sampler, so every record's span is sampled), with the
 * endpoint a local OTLP receiver in this process (lib/otlp-sink.ts) that
 * answers 200 at once, as S3's "on" server does: no collector runs here, and
 * an endpoint that refuses connections would measure failed exports and their
 * retries instead of the work production does. Metrics export every 5 s (S3's
 * setting; the default is 60 s). The sink keeps the trace bodies: after the
 * trials the bench decodes them and reports how many apply spans arrived as
 * children of the traceparent their record carried (spans the SDK dropped
 * would show there). Export runs in the background, 512 spans at a time, so a
 * trial's last few hundred spans would leave after it ends: the "on" process
 * flushes after each trial, outside the rate timing but inside its CPU
 * figure, so CPU ms per 1k covers exporting every span.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { type Bus, createBus, type KafkaClientName, type OutgoingRecord } from '@ctxflow/bus';
import { type TicketUpdate, ticketKey } from '@ctxflow/contracts';
import { RECORD_ID_HEADER, RedisSubscriptionStore } from '@ctxflow/step-context';
import { SPAN_STEP_CONTEXT_APPLY, TRACEPARENT_HEADER } from '@ctxflow/telemetry';
import { Redis } from 'ioredis';
import { cpuMs, perThousand } from './lib/cpu.ts';
import { startOtlpSink } from './lib/otlp-sink.ts';
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
}

const PARTITIONS = 3;
const PUBLISH_BATCH = 100;
const TICKETS = 100;
const SUMMARY =
  'Customer replied: the checkout still fails for carts over 50 items after the last deploy; attaching a HAR file.';

interface Consumer {
  child: ChildProcess;
  expect(total: number): Promise<void>;
  cpuMs(): Promise<number>;
  /** Exports the child's ended spans now (a no-op without telemetry). */
  flush(): Promise<void>;
  stop(): Promise<void>;
}

async function startConsumer(env: Record<string, string>): Promise<Consumer> {
  const child = fork(new URL('./lib/pipeline-child.ts', import.meta.url), [], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${env.BENCH_MODE} consumer not ready after 90 s`)), 90_000);
    child.once('exit', (code) => reject(new Error(`${env.BENCH_MODE} consumer exited with ${code}`)));
    child.on('message', (m: { type: string }) => {
      if (m.type === 'ready') {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  const ask = <T>(message: object, answer: string, pick: (m: Record<string, unknown>) => T) =>
    new Promise<T>((resolve) => {
      const onMessage = (m: Record<string, unknown>) => {
        if (m.type !== answer) return;
        child.off('message', onMessage);
        resolve(pick(m));
      };
      child.on('message', onMessage);
      child.send(message);
    });
  return {
    child,
    expect: (total) => ask({ type: 'expect', total }, 'reached', () => undefined),
    cpuMs: () => ask({ type: 'cpu' }, 'cpu', (m) => m.ms as number),
    async flush() {
      const error = await ask({ type: 'flush' }, 'flushed', (m) => m.error as string | undefined);
      if (error) throw new Error(`${env.BENCH_MODE} consumer: span export failed: ${error}`);
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.send({ type: 'stop' });
      await exited;
    },
  };
}

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

/**
 * `record` with a sampled `traceparent` header of a fresh trace, as the
 * feed-ingestor's publish span writes it; `parents` gets `<trace id>-<span id>`.
 */
function withTraceparent(record: OutgoingRecord, parents: Set<string>): OutgoingRecord {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  parents.add(`${traceId}-${spanId}`);
  return { ...record, headers: { ...record.headers, [TRACEPARENT_HEADER]: `00-${traceId}-${spanId}-01` } };
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
    ...(options.telemetry ? { otel: `ctxflow-bench.s6.${client}.${run}.updates` } : {}),
  };
  const redis = new Redis(options.redisUrl);
  const bus = createBus({ brokers: options.brokers, client, clientId: `ctxflow-bench-producer-${client}` });
  const consumers: Consumer[] = [];
  const sink = options.telemetry ? await startOtlpSink() : undefined;
  /** `<trace id>-<span id>` of every traceparent the "on" records carried. */
  const parents = new Set<string>();
  try {
    await bus.admin.ensureTopics(Object.values(topics).map((name) => ({ name, partitions: PARTITIONS })));
    // One session per ticket: every update lands in exactly one batch stream.
    const subscriptions = new RedisSubscriptionStore({ redis, prefix });
    for (let t = 0; t < TICKETS; t++) {
      await subscriptions.subscribe(`ses_bench_${t}`, { source: 'generic', ticket: `PROJ-${t}` });
    }
    const common = {
      KAFKA_BROKERS: options.brokers.join(','),
      BENCH_CLIENT: client,
      REDIS_URL: options.redisUrl,
      BENCH_PREFIX: prefix,
    };
    progress(
      `S1 ${client}: starting the step-context${sink ? ', step-context with OpenTelemetry' : ''} and raw consumers (group joins, not timed)`,
    );
    const pipeline = await startConsumer({
      ...common,
      BENCH_MODE: 'step-context',
      BENCH_TOPIC: topics.pipeline,
      BENCH_GROUP: `${topics.pipeline}.step-context`,
    });
    consumers.push(pipeline);
    const raw = await startConsumer({
      ...common,
      BENCH_MODE: 'raw',
      BENCH_TOPIC: topics.raw,
      BENCH_GROUP: `${topics.raw}.raw`,
    });
    consumers.push(raw);
    const sides = [
      { name: 'pipeline', consumer: pipeline, topic: topics.pipeline, total: 0, traced: false },
      { name: 'raw', consumer: raw, topic: topics.raw, total: 0, traced: false },
    ];
    if (sink && topics.otel) {
      const otel = await startConsumer({
        ...common,
        BENCH_MODE: 'step-context',
        BENCH_TOPIC: topics.otel,
        BENCH_GROUP: `${topics.otel}.step-context`,
        BENCH_TELEMETRY: '1',
        OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
        OTEL_TRACES_SAMPLER: 'parentbased_always_on',
        OTEL_METRIC_EXPORT_INTERVAL: '5000',
      });
      consumers.push(otel);
      // "off" (the S1 pipeline) in the middle: every trial runs "on" right next to it, before or after.
      sides.unshift({ name: 'pipeline, OpenTelemetry on', consumer: otel, topic: topics.otel, total: 0, traced: true });
    }

    const throughput = async (side: (typeof sides)[number], count: number) => {
      const records = Array.from({ length: count }, () =>
        side.traced ? withTraceparent(updateRecord(run), parents) : updateRecord(run),
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
      const consumerMs = (await side.consumer.cpuMs()) - childCpu;
      return {
        rate: count / (elapsed / 1000),
        consumerCpuPer1k: perThousand(consumerMs, count),
        producerCpuPer1k: perThousand(producerMs, count),
      };
    };

    // Warm-up: JIT, connections, partition leaders, Redis scripts.
    for (const side of sides) await throughput(side, Math.min(1000, options.records));

    const rates = new Map<string, { rate: number; consumerCpuPer1k: number; producerCpuPer1k: number }[]>(
      sides.map((s) => [s.name, []]),
    );
    for (let trial = 0; trial < options.trials; trial++) {
      const order = trial % 2 === 0 ? sides : [...sides].reverse();
      for (const side of order) {
        const r = await throughput(side, options.records);
        rates.get(side.name)!.push(r);
        progress(
          `S1 ${client} trial ${trial + 1}/${options.trials} ${side.name}: ${Math.round(r.rate)} updates/s, ` +
            `consumer ${r.consumerCpuPer1k.toFixed(0)} CPU ms/1k, producer ${r.producerCpuPer1k.toFixed(0)} CPU ms/1k`,
        );
      }
    }

    // What the "on" process exported during the trials (all flushed by now): decoded outside any timing.
    const applySpans = (sink?.spans() ?? []).filter((span) => span.name === SPAN_STEP_CONTEXT_APPLY);
    const linkedSpans = applySpans.filter((span) => parents.has(`${span.traceId}-${span.parentSpanId}`)).length;
    const exports = sink?.requests() ?? {};

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
    const telemetryResults: ScenarioResult[] = [];
    const o = rates.get('pipeline, OpenTelemetry on');
    if (o) {
      const telemetryGoal = { op: '>=' as const, value: 0.9 };
      const onOverOff = summarize(o.map((x, i) => x.rate / p[i]!.rate));
      telemetryResults.push({
        id: `S6-S1-${client}`,
        title: `OpenTelemetry on over off, S1 pipeline, ${client}`,
        ratioOf: 'updates/s into batch streams with telemetry in step-context over without',
        goal: telemetryGoal,
        ratio: onOverOff,
        met: meets(telemetryGoal, onOverOff.median),
        cpuMsPer1k: {
          'step-context consumer on': round(median(o.map((x) => x.consumerCpuPer1k)), 1),
          'step-context consumer off': cpu['step-context consumer'],
          'producer on': round(median(o.map((x) => x.producerCpuPer1k)), 1),
          'producer off': cpu.producer,
        },
        figures: {
          'on updates/s': Math.round(median(o.map((x) => x.rate))),
          'off updates/s': Math.round(median(p.map((x) => x.rate))),
          // Less sensitive to other load on the machine: the ratio if step-context's CPU were the only limit.
          'step-context CPU ratio': round(median(p.map((x, i) => x.consumerCpuPer1k / o[i]!.consumerCpuPer1k)), 2),
          'apply spans exported': applySpans.length,
          'children of their record traceparent': `${linkedSpans} of ${parents.size} records`,
          'OTLP export requests': `traces ${exports['/v1/traces'] ?? 0}, metrics ${exports['/v1/metrics'] ?? 0}`,
        },
        notes: [
          setup,
          'same trials as S1, sides interleaved (on, off, raw; reversed every other trial)',
          'on: startTelemetry + createConsumerTelemetry as in services/step-context main (no instrumentation hook, as in production), ' +
            'parentbased_always_on, OTLP/protobuf to a local sink answering 200, metrics every 5 s; ' +
            'records carry a sampled traceparent (a fresh trace each, as the feed-ingestor publish span writes it); off: none',
          'on CPU includes a span flush after each trial (outside the rate timing), so it covers exporting every span; ' +
            'producer on includes the local OTLP sink, which runs in the producer process',
        ],
      });
    }
    return [
      {
        id: `S1-${client}`,
        title: `Pipeline throughput, ${client}`,
        ratioOf: 'updates/s into batch streams over raw produce-then-consume',
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
        ratioOf: 'p50 publish -> in batch stream over p50 raw produce -> consume',
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
    await Promise.allSettled([bus.publisher.close(), bus.admin.close(), sink?.close()]);
    await deleteByPrefix(redis, prefix);
    redis.disconnect();
  }
}

export async function runPipeline(options: PipelineOptions): Promise<ScenarioResult[]> {
  const results: ScenarioResult[] = [];
  for (const client of options.clients) results.push(...(await runClient(client, options)));
  return results;
}
