import { createBus } from '@ctxflow/bus';
import { TOPICS } from '@ctxflow/contracts';
import {
  connectRedis,
  consumerGroupOptions,
  createAuditLog,
  createIdentity,
  kafkaBusSecurity,
  runService,
  verifyRedis,
  withinMs,
} from '@ctxflow/service-kit';
import {
  MemorySubscriptionStore,
  RedisSessionDirectory,
  RedisSubscriptionStore,
  type SubscriptionStore,
} from '@ctxflow/subscriptions';
import { startTelemetry } from '@ctxflow/telemetry';
import { MemoryFeedStreams } from './adapters/memory-feed-streams.ts';
import { RedisFeedStreams } from './adapters/redis-feed-streams.ts';
import { buildStepContextApp } from './build-app.ts';
import { loadStepContextConfig } from './config.ts';
import { createConsumerTelemetry } from './consumer-telemetry.ts';
import { FeedStepContext } from './domain/feed-step-context.ts';
import { StepContextService } from './domain/step-context-service.ts';
import type { FeedStreams } from './ports/feed-streams.ts';

/**
 * step-context as its own process: Kafka ticket updates in, Redis feed streams,
 * `POST /step-context` for the runner, and the subscription routes, which find
 * a session's owner in the runner's session records on the same Redis
 * (RedisSessionDirectory: one read, no credential of anyone).
 */
await runService({
  name: 'step-context',
  loadConfig: loadStepContextConfig,
  startTelemetry: () => startTelemetry({ serviceName: 'ctxflow-step-context' }),
  async start({ config, logger, telemetry, lifecycle, connect }) {
    const identity = createIdentity(config.identity, { log: logger, audit: createAuditLog(logger) });

    const redis = connectRedis(config);
    if (redis) await connect('Redis', config.redisSecurity, () => verifyRedis(redis));
    // Updates are stored only in streams some session follows (an erased session follows none);
    // every key of a session expires CTXFLOW_SESSION_TTL_MS after its last write or step.
    const ttlMs = config.sessionTtlMs;
    const memorySubscriptions = redis ? undefined : new MemorySubscriptionStore({ ttlMs });
    const subscriptions: SubscriptionStore =
      memorySubscriptions ?? new RedisSubscriptionStore({ redis: redis!, prefix: config.redisPrefix, ttlMs });
    const feedStreams: FeedStreams = memorySubscriptions
      ? new MemoryFeedStreams({ ttlMs, subscriptions: memorySubscriptions })
      : new RedisFeedStreams({ redis: redis!, prefix: config.redisPrefix, ttlMs });
    const feed = new FeedStepContext({ feedStreams, subscriptions });
    if (!redis) {
      logger.warn("no REDIS_URL: the subscription routes are not served (the runner's sessions are not readable here)");
    }

    const bus = createBus({
      client: config.kafkaClient,
      topicPrefix: config.kafkaTopicPrefix,
      clientId: 'ctxflow-step-context',
      ...(config.kafkaBrokers ? { brokers: config.kafkaBrokers } : {}),
      ...consumerGroupOptions({
        sessionTimeoutMs: config.kafkaSessionTimeoutMs,
        rebalanceTimeoutMs: config.kafkaRebalanceTimeoutMs,
      }),
      ...kafkaBusSecurity(config.kafkaSecurity),
    });
    if (config.kafkaBrokers) {
      await connect('Kafka', config.kafkaSecurity, () =>
        bus.admin.ensureTopics([
          { name: TOPICS.ticketUpdates, partitions: 12 },
          { name: TOPICS.ticketUpdatesDlq, partitions: 12 },
        ]),
      );
    }
    const service = new StepContextService({
      subscriber: bus.subscriber,
      deadLetters: bus.publisher,
      feedStreams,
      subscriptions,
      log: logger,
      telemetry: createConsumerTelemetry(),
      offsetReset: config.offsetReset,
      ...(config.groupId ? { groupId: config.groupId } : {}),
    });
    await service.start();

    const app = buildStepContextApp({
      subscriptions,
      feed,
      ...(redis ? { directory: new RedisSessionDirectory({ redis, prefix: config.redisPrefix }) } : {}),
      authenticate: identity.authenticate,
      ...(config.serviceTokens ? { serviceTokens: config.serviceTokens } : {}),
      logger,
      metricsText: () => telemetry.metricsText(),
      readiness: {
        accepting: () => lifecycle.notStopping(),
        // Listening starts only after the consumer joined its group and has its assignment.
        ...(config.kafkaBrokers ? { kafka: withinMs(() => service.ready(), 2_000) } : {}),
        ...(redis ? { redis: withinMs(() => redis.ping(), 2_000) } : {}),
      },
    });
    return {
      app, // closed first: new requests refused, in-flight hook reads finish
      close: [
        { name: 'consumer', run: () => service.stop() }, // the in-flight run finishes; its offsets are already in Redis
        { name: 'publisher', run: () => bus.publisher.close() },
        { name: 'admin', run: () => bus.admin.close() },
        { name: 'redis', run: async () => redis?.disconnect() },
        { name: 'key-file', run: async () => identity.close() },
      ],
      listening: { redis: Boolean(redis), kafka: Boolean(config.kafkaBrokers) },
    };
  },
});
