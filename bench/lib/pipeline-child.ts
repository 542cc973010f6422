/**
 * A consumer process of the S1 benchmark, on one Kafka client:
 *   mode `step-context`: the StepContextService (Redis subscription and batch
 *     stores) consuming ticket updates into session feed streams;
 *   mode `raw`: a subscription of the same bus client with a handler that only
 *     counts (the raw produce-then-consume baseline).
 * Counts a record when it is durable in its sink (step-context: the batch
 * store's atomic write of its run resolved; raw: the handler ran).
 *
 * IPC (parent -> child): `{ type: 'expect', total }` answers
 * `{ type: 'reached', count }` once `total` records were counted (cumulative);
 * `{ type: 'trace', on }` turns on `{ type: 'seen', id }` per record;
 * `{ type: 'cpu' }` answers `{ type: 'cpu', ms, mainMs }` (the process, its main thread); `{ type: 'flush' }` exports
 * every ended span now and answers `{ type: 'flushed', error? }` (nothing to
 * export without telemetry); `{ type: 'stop' }` exits.
 * On start it sends `{ type: 'ready' }` once the group assignment is in place.
 *
 * Environment: BENCH_MODE, BENCH_CLIENT, KAFKA_BROKERS, BENCH_TOPIC,
 * BENCH_GROUP, REDIS_URL, BENCH_PREFIX. BENCH_TELEMETRY=1 (mode
 * `step-context`) starts OpenTelemetry as services/step-context's main does:
 * `startTelemetry({ serviceName: 'ctxflow-step-context' })` before anything
 * else, exporting to the OTLP endpoint in the standard OTEL_* variables, and
 * the service gets `createConsumerTelemetry()` (one apply span per record,
 * child of the record's `traceparent`; the consumer-lag gauge).
 */
import type { KafkaClientName } from '@ctxflow/bus';
import { createBus } from '@ctxflow/bus';
import type { TicketUpdate } from '@ctxflow/contracts';
import {
  type ConsumedPosition,
  type ConsumedRecord,
  createConsumerTelemetry,
  type FeedStreams,
  RECORD_ID_HEADER,
  RedisFeedStreams,
  StepContextService,
} from '@ctxflow/step-context';
import { RedisSubscriptionStore } from '@ctxflow/subscriptions';
import { type RunningTelemetry, startTelemetry } from '@ctxflow/telemetry';
import { trace as otelTrace } from '@opentelemetry/api';
import { Redis } from 'ioredis';
import { cpuMs } from './cpu.ts';

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};

// First, as in main: the global providers are in place before the bus, the stores and the service exist.
const telemetry: RunningTelemetry | undefined =
  env('BENCH_MODE') === 'step-context' && process.env.BENCH_TELEMETRY === '1'
    ? startTelemetry({ serviceName: 'ctxflow-step-context' })
    : undefined;

/** Exports the spans ended so far (the SDK tracer provider behind the global proxy). */
async function flushSpans(): Promise<void> {
  const proxy = otelTrace.getTracerProvider() as { getDelegate?(): unknown };
  const provider = (proxy.getDelegate?.() ?? proxy) as { forceFlush?(): Promise<void> };
  await provider.forceFlush?.();
}

let count = 0;
let expected = Number.POSITIVE_INFINITY;
let trace = false;
const counted = (id: string | undefined) => {
  count += 1;
  if (trace && id !== undefined) process.send?.({ type: 'seen', id });
  if (count >= expected) {
    expected = Number.POSITIVE_INFINITY;
    process.send?.({ type: 'reached', count });
  }
};

const bus = createBus({
  brokers: env('KAFKA_BROKERS').split(','),
  client: env('BENCH_CLIENT') as KafkaClientName,
  clientId: `ctxflow-bench-${env('BENCH_MODE')}`,
  heartbeatIntervalMs: 1000,
});
const topic = env('BENCH_TOPIC');
const groupId = env('BENCH_GROUP');
let stop: () => Promise<void>;

if (env('BENCH_MODE') === 'step-context') {
  const redis = new Redis(env('REDIS_URL'));
  const prefix = env('BENCH_PREFIX');
  const inner = new RedisFeedStreams({ redis, prefix });
  // Counts each update once its atomic write resolved; every other call goes straight through.
  const feedStreams: FeedStreams = {
    append: (u) => inner.append(u),
    readSince: (f, a, l) => inner.readSince(f, a, l),
    positionOf: (t, s) => inner.positionOf(t, s),
    recordOffset: (p) => inner.recordOffset(p),
    resumeFrom: (t, p) => inner.resumeFrom(t, p),
    storedPartition: (t: string, p: number) => inner.storedPartition(t, p),
    rebindPartition: (...args: Parameters<FeedStreams['rebindPartition']>) => inner.rebindPartition(...args),
    async applyUpdate(update: TicketUpdate, position: ConsumedPosition) {
      const result = await inner.applyUpdate(update, position);
      counted(update.id);
      return result;
    },
    async applyRun(records: readonly ConsumedRecord[]) {
      const results = await inner.applyRun(records);
      for (const record of records) if (record.update) counted(record.update.id);
      return results;
    },
  };
  const service = new StepContextService({
    subscriber: bus.subscriber,
    subscriptions: new RedisSubscriptionStore({ redis, prefix }),
    feedStreams,
    topic,
    groupId,
    ...(telemetry ? { telemetry: createConsumerTelemetry() } : {}),
  });
  await service.start();
  stop = async () => {
    await service.stop();
    redis.disconnect();
  };
} else {
  const subscription = await bus.subscriber.subscribe({
    topic,
    groupId,
    handle: async (records) => {
      for (const record of records) counted(record.headers[RECORD_ID_HEADER]);
    },
  });
  await subscription.ready();
  stop = () => subscription.close();
}

process.on('message', async (message: { type: string; total?: number; on?: boolean }) => {
  if (message.type === 'expect') {
    expected = message.total!;
    if (count >= expected) {
      expected = Number.POSITIVE_INFINITY;
      process.send?.({ type: 'reached', count });
    }
  }
  if (message.type === 'trace') trace = message.on === true;
  if (message.type === 'cpu') {
    const main = process.threadCpuUsage();
    process.send?.({ type: 'cpu', ms: cpuMs(), mainMs: (main.user + main.system) / 1000 });
  }
  if (message.type === 'flush') {
    try {
      if (telemetry) await flushSpans();
      process.send?.({ type: 'flushed' });
    } catch (err) {
      process.send?.({ type: 'flushed', error: String(err) });
    }
  }
  if (message.type === 'stop') {
    await stop();
    await Promise.all([bus.publisher.close(), bus.admin.close()]);
    await telemetry?.shutdown();
    process.exit(0);
  }
});
process.send?.({ type: 'ready' });
