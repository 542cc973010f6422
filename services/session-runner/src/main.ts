import { createBus } from '@ctxflow/bus';
import { TOPICS } from '@ctxflow/contracts';
import {
  closeHttp,
  configOrExit,
  connectOrExit,
  connectRedis,
  createAuthenticator,
  createLogger,
  HTTP_GRACE_SHARE,
  handleShutdown,
  kafkaBusSecurity,
  sessionTimeoutOptions,
  verifyRedis,
  withinMs,
} from '@ctxflow/service-kit';
import { createConsumerTelemetry, createContextTelemetry, startTelemetry } from '@ctxflow/telemetry';
import { HttpStepContext } from './adapters/http-step-context.ts';
import { MemorySessionStore } from './adapters/memory-session-store.ts';
import { RedisMemoryRecall } from './adapters/redis-memory-recall.ts';
import { RedisSessionStore } from './adapters/redis-session-store.ts';
import { buildRunnerApp } from './build-app.ts';
import { loadRunnerConfig } from './config.ts';
import { createEngine } from './create-engine.ts';
import { inspectorRoutes } from './http/inspector-routes.ts';
import type { MemoryRecall } from './ports/memory-recall.ts';
import type { SessionStore } from './ports/session-store.ts';
import { startStepRequestConsumer } from './step-request-consumer.ts';

/** The session-runner as its own process: Redis store, Kafka step requests, the step-context service as its feed hook. */
async function main() {
  const config = configOrExit('session-runner', () => loadRunnerConfig(process.env));
  const logger = createLogger({ service: 'session-runner', level: config.logLevel });
  const telemetry = startTelemetry({ serviceName: 'ctxflow-session-runner' });

  const redis = connectRedis(config);
  if (redis) await connectOrExit('session-runner', 'Redis', config.redisSecurity, () => verifyRedis(redis));
  let store: SessionStore = new MemorySessionStore();
  let memory: MemoryRecall | undefined;
  if (redis) {
    store = new RedisSessionStore(redis, { prefix: config.redisPrefix });
    memory = new RedisMemoryRecall(redis, { prefix: config.redisPrefix });
  }
  const engine = createEngine({
    store,
    feed: new HttpStepContext(config.stepContextUrl),
    telemetry: createContextTelemetry(),
    heldSessions: config.heldSessions,
    heldBytes: config.heldBytes,
    ...(memory ? { memory } : {}),
  });

  const bus = createBus({
    client: config.kafkaClient,
    topicPrefix: config.kafkaTopicPrefix,
    clientId: 'ctxflow-session-runner',
    ...(config.kafkaBrokers ? { brokers: config.kafkaBrokers } : {}),
    ...sessionTimeoutOptions(config.kafkaSessionTimeoutMs),
    ...kafkaBusSecurity(config.kafkaSecurity),
  });
  let consumer: Awaited<ReturnType<typeof startStepRequestConsumer>> | undefined;
  if (config.kafkaBrokers) {
    await connectOrExit('session-runner', 'Kafka', config.kafkaSecurity, () =>
      bus.admin.ensureTopics([
        { name: TOPICS.stepRequests, partitions: 12 },
        { name: TOPICS.stepResults, partitions: 12 },
      ]),
    );
    consumer = await startStepRequestConsumer({
      engine,
      store,
      subscriber: bus.subscriber,
      publisher: bus.publisher,
      log: logger,
      telemetry: createConsumerTelemetry(),
      ...(config.groupId ? { groupId: config.groupId } : {}),
    });
  }

  const lifecycle = handleShutdown(
    'session-runner',
    logger,
    () => [
      { name: 'http', run: () => closeHttp(app, config.shutdownGraceMs * HTTP_GRACE_SHARE) }, // new requests refused; in-flight HTTP steps commit and answer
      { name: 'consumer', run: async () => consumer?.close() }, // the in-flight step request finishes, offsets commit
      { name: 'publisher', run: () => bus.publisher.close() },
      { name: 'admin', run: () => bus.admin.close() },
      { name: 'redis', run: async () => redis?.disconnect() },
      { name: 'telemetry', run: () => telemetry.shutdown() },
    ],
    { graceMs: config.shutdownGraceMs },
  );
  const app = buildRunnerApp({
    engine,
    authenticate: createAuthenticator(config.apiKeys),
    logger,
    metricsText: () => telemetry.metricsText(),
    openRoutes: [inspectorRoutes],
    readiness: {
      accepting: () => lifecycle.notStopping(),
      ...(redis ? { redis: withinMs(() => redis.ping(), 2_000) } : {}),
      ...(consumer ? { kafka: withinMs(() => consumer.ready(), 2_000) } : {}),
    },
  });
  await app.listen({ host: config.host, port: config.port });
  logger.info(
    { port: config.port, redis: Boolean(redis), kafka: Boolean(config.kafkaBrokers) },
    'session-runner: listening',
  );
}

await main();
