import { createBus } from '@ctxflow/bus';
import { TOPICS } from '@ctxflow/contracts';
import { createFeedTelemetry, type DeliveryLedger, MemoryDeliveryLedger, RedisDeliveryLedger } from '@ctxflow/feeds';
import {
  closeHttp,
  configOrExit,
  connectOrExit,
  connectRedis,
  createLogger,
  HTTP_GRACE_SHARE,
  handleShutdown,
  kafkaBusSecurity,
  verifyRedis,
  withinMs,
} from '@ctxflow/service-kit';
import { startTelemetry } from '@ctxflow/telemetry';
import { buildFeedApp } from './build-app.ts';
import { loadFeedConfig } from './config.ts';

/**
 * The feed-ingestor as its own process (the stack): reads configuration once,
 * picks Kafka or the in-memory bus (KAFKA_BROKERS) and the Redis or in-memory
 * ledger (REDIS_URL or REDIS_CLUSTER_NODES), listens on CTXFLOW_HOST:CTXFLOW_FEED_PORT.
 */
async function main() {
  const config = configOrExit('feed-ingestor', () => loadFeedConfig(process.env));
  const logger = createLogger({ service: 'feed-ingestor', level: config.logLevel });
  const telemetry = startTelemetry({ serviceName: 'ctxflow-feed-ingestor' });
  const bus = createBus({
    brokers: config.kafkaBrokers,
    client: config.kafkaClient,
    topicPrefix: config.kafkaTopicPrefix,
    clientId: 'ctxflow-feed-ingestor',
    log: logger,
    ...kafkaBusSecurity(config.kafkaSecurity),
  });
  await connectOrExit('feed-ingestor', 'Kafka', config.kafkaSecurity, () =>
    bus.admin.ensureTopics([{ name: TOPICS.ticketUpdates, partitions: config.ticketUpdatePartitions }]),
  );
  // A server (REDIS_URL) or a Cluster (REDIS_CLUSTER_NODES): each ledger command touches one key.
  const redis = connectRedis(config, { maxRetriesPerRequest: 2 });
  if (redis) await connectOrExit('feed-ingestor', 'Redis', config.redisSecurity, () => verifyRedis(redis));
  const ledger: DeliveryLedger = redis
    ? new RedisDeliveryLedger({ redis, prefix: config.redisPrefix, ownsClient: true })
    : new MemoryDeliveryLedger();
  if (!config.kafkaBrokers) logger.warn('no KAFKA_BROKERS: ticket updates go to an in-memory bus in this process only');
  const lifecycle = handleShutdown(
    'feed-ingestor',
    logger,
    () => [
      { name: 'http', run: () => closeHttp(app, config.shutdownGraceMs * HTTP_GRACE_SHARE) }, // new requests refused, in-flight deliveries finish (published or not)
      { name: 'publisher', run: () => bus.publisher.close() },
      { name: 'admin', run: () => bus.admin.close() },
      { name: 'ledger', run: () => ledger.close() },
      { name: 'telemetry', run: () => telemetry.shutdown() },
    ],
    { graceMs: config.shutdownGraceMs },
  );
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
      ...(config.kafkaBrokers
        ? {
            kafka: withinMs(
              () => bus.admin.ensureTopics([{ name: TOPICS.ticketUpdates, partitions: config.ticketUpdatePartitions }]),
              3_000,
            ),
          }
        : {}),
      ...(redis ? { redis: withinMs(() => redis.ping(), 2_000) } : {}),
    },
  });
  await app.listen({ host: config.host, port: config.port });
  logger.info({ host: config.host, port: config.port, feeds: Object.keys(config.secrets) }, 'feed-ingestor: listening');
}

await main();
