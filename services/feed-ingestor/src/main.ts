import { createBus } from '@ctxflow/bus';
import { TOPICS } from '@ctxflow/contracts';
import { createFeedTelemetry, type DeliveryLedger, MemoryDeliveryLedger, RedisDeliveryLedger } from '@ctxflow/feeds';
import { connectRedis, kafkaBusSecurity, runService, verifyRedis, withinMs } from '@ctxflow/service-kit';
import { startTelemetry } from '@ctxflow/telemetry';
import { buildFeedApp } from './build-app.ts';
import { loadFeedConfig } from './config.ts';

/**
 * The feed-ingestor as its own process (the stack): picks Kafka or the
 * in-memory bus (KAFKA_BROKERS) and the Redis or in-memory ledger (REDIS_URL
 * or REDIS_CLUSTER_NODES), listens on CTXFLOW_HOST:CTXFLOW_FEED_PORT.
 */
await runService({
  name: 'feed-ingestor',
  loadConfig: loadFeedConfig,
  startTelemetry: () => startTelemetry({ serviceName: 'ctxflow-feed-ingestor' }),
  async start({ config, logger, telemetry, lifecycle, connect }) {
    const bus = createBus({
      brokers: config.kafkaBrokers,
      client: config.kafkaClient,
      topicPrefix: config.kafkaTopicPrefix,
      clientId: 'ctxflow-feed-ingestor',
      log: logger,
      ...kafkaBusSecurity(config.kafkaSecurity),
    });
    const topics = [{ name: TOPICS.ticketUpdates, partitions: config.ticketUpdatePartitions }];
    await connect('Kafka', config.kafkaSecurity, () => bus.admin.ensureTopics(topics));
    // A server (REDIS_URL) or a Cluster (REDIS_CLUSTER_NODES): each ledger command touches one key.
    const redis = connectRedis(config, { maxRetriesPerRequest: 2 });
    if (redis) await connect('Redis', config.redisSecurity, () => verifyRedis(redis));
    const ledger: DeliveryLedger = redis
      ? new RedisDeliveryLedger({ redis, prefix: config.redisPrefix, ownsClient: true })
      : new MemoryDeliveryLedger();
    if (!config.kafkaBrokers)
      logger.warn('no KAFKA_BROKERS: ticket updates go to an in-memory bus in this process only');
    const app = await buildFeedApp({
      publisher: bus.publisher,
      ledger,
      secrets: config.secrets,
      maxBodyBytes: config.maxBodyBytes,
      retainMs: config.dedupeTtlMs,
      leaseMs: config.leaseMs,
      logger,
      telemetry: createFeedTelemetry(),
      metricsText: () => telemetry.metricsText(),
      readiness: {
        accepting: () => lifecycle.notStopping(),
        ...(config.kafkaBrokers ? { kafka: withinMs(() => bus.admin.ensureTopics(topics), 3_000) } : {}),
        ...(redis ? { redis: withinMs(() => redis.ping(), 2_000) } : {}),
      },
    });
    return {
      app, // closed first: new requests refused, in-flight deliveries finish (published or not)
      close: [
        { name: 'publisher', run: () => bus.publisher.close() },
        { name: 'admin', run: () => bus.admin.close() },
        { name: 'ledger', run: () => ledger.close() },
      ],
      listening: { feeds: Object.keys(config.secrets) },
    };
  },
});
