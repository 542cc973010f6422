import { createBus } from '@ctxflow/bus';
import { TOPICS } from '@ctxflow/contracts';
import { ConfigError, createLogger } from '@ctxflow/service-kit';
import { Redis } from 'ioredis';
import { buildFeedApp } from './build-app.ts';
import { loadFeedConfig } from './config.ts';
import type { DeliveryLedger } from './delivery-ledger.ts';
import { MemoryDeliveryLedger } from './memory-delivery-ledger.ts';
import { RedisDeliveryLedger } from './redis-delivery-ledger.ts';

/**
 * The feed-ingestor as its own process (the stack): reads configuration once,
 * picks Kafka or the in-memory bus (KAFKA_BROKERS) and the Redis or in-memory
 * ledger (REDIS_URL), listens on CTXFLOW_HOST:CTXFLOW_FEED_PORT.
 */
async function main() {
  let config: ReturnType<typeof loadFeedConfig>;
  try {
    config = loadFeedConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`feed-ingestor: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger({ service: 'feed-ingestor', level: config.logLevel });
  const bus = createBus({
    brokers: config.kafkaBrokers,
    client: config.kafkaClient,
    clientId: 'ctxflow-feed-ingestor',
    log: logger,
  });
  await bus.admin.ensureTopics([{ name: TOPICS.ticketUpdates, partitions: config.ticketUpdatePartitions }]);
  const ledger: DeliveryLedger = config.redisUrl
    ? new RedisDeliveryLedger({
        redis: new Redis(config.redisUrl, { maxRetriesPerRequest: 2 }),
        prefix: config.redisPrefix,
        ownsClient: true,
      })
    : new MemoryDeliveryLedger();
  if (!config.kafkaBrokers) logger.warn('no KAFKA_BROKERS: ticket updates go to an in-memory bus in this process only');
  const app = await buildFeedApp({
    publisher: bus.publisher,
    ledger,
    secrets: config.secrets,
    maxBodyBytes: config.maxBodyBytes,
    retainMs: config.dedupeTtlMs,
    logger,
  });
  await app.listen({ host: config.host, port: config.port });
  logger.info({ host: config.host, port: config.port, feeds: Object.keys(config.secrets) }, 'feed-ingestor: listening');

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping: finishing in-flight deliveries');
    await app.close();
    await bus.publisher.close();
    await bus.admin.close();
    await ledger.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

await main();
