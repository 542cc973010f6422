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
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { type Bus, createBus, type KafkaClientName, type OutgoingRecord } from '@ctxflow/bus';
import { type TicketUpdate, ticketKey } from '@ctxflow/contracts';
import { RECORD_ID_HEADER, RedisSubscriptionStore } from '@ctxflow/step-context';
import { Redis } from 'ioredis';
import { cpuMs, perThousand } from './lib/cpu.ts';
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
  };
  const redis = new Redis(options.redisUrl);
  const bus = createBus({ brokers: options.brokers, client, clientId: `ctxflow-bench-producer-${client}` });
  const consumers: Consumer[] = [];
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
    progress(`S1 ${client}: starting the step-context and raw consumers (group joins, not timed)`);
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
      { name: 'pipeline', consumer: pipeline, topic: topics.pipeline, total: 0 },
      { name: 'raw', consumer: raw, topic: topics.raw, total: 0 },
    ];

    const throughput = async (side: (typeof sides)[number], count: number) => {
      const records = Array.from({ length: count }, () => updateRecord(run));
      side.total += count;
      const reached = side.consumer.expect(side.total);
      const childCpu = await side.consumer.cpuMs();
      const cpu = process.cpuUsage();
      const start = performance.now();
      await publishAll(bus, side.topic, records);
      const producerMs = cpuMs(cpu);
      await reached;
      const elapsed = performance.now() - start;
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

    // Latency: one update at a time, alternating sides.
    const latencies = new Map<string, number[]>(sides.map((s) => [s.name, []]));
    for (const side of sides) side.consumer.child.send({ type: 'trace', on: true });
    for (let i = 0; i < options.latencySamples; i++) {
      for (const side of i % 2 === 0 ? sides : [...sides].reverse()) {
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
    for (const side of sides) side.consumer.child.send({ type: 'trace', on: false });

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
    ];
  } finally {
    await Promise.allSettled(consumers.map((c) => c.stop()));
    await Promise.allSettled([bus.publisher.close(), bus.admin.close()]);
    await deleteByPrefix(redis, prefix);
    redis.disconnect();
  }
}

export async function runPipeline(options: PipelineOptions): Promise<ScenarioResult[]> {
  const results: ScenarioResult[] = [];
  for (const client of options.clients) results.push(...(await runClient(client, options)));
  return results;
}
