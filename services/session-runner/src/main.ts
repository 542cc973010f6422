import { hostname } from 'node:os';
import { createBus } from '@ctxflow/bus';
import { TOPICS } from '@ctxflow/contracts';
import {
  createFeedTelemetry,
  type DeliveryIndex,
  type DeliveryLedger,
  deliveryRoutes,
  feedRoutes,
  MemoryDeliveryIndex,
  MemoryDeliveryLedger,
  RedisDeliveryIndex,
  RedisDeliveryLedger,
} from '@ctxflow/feeds';
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
  RedisSubscriptionStore,
  type SessionDirectory,
  type SubscriptionStore,
  subscriptionRoutes,
} from '@ctxflow/subscriptions';
import { startTelemetry } from '@ctxflow/telemetry';
import type { FastifyInstance } from 'fastify';
import { HttpStepContext } from './adapters/http-step-context.ts';
import { MemoryRowOutbox } from './adapters/memory-row-outbox.ts';
import { MemorySessionStore } from './adapters/memory-session-store.ts';
import { MemoryStepUsageStore } from './adapters/memory-step-usage-store.ts';
import { MemoryTopicIdRecord } from './adapters/memory-topic-id-record.ts';
import { createRelayTelemetry } from './adapters/otel-relay-telemetry.ts';
import { createConsumerLag, createContextTelemetry } from './adapters/otel-runner-telemetry.ts';
import { RedisMemoryRecall } from './adapters/redis-memory-recall.ts';
import { RedisRowOutbox } from './adapters/redis-row-outbox.ts';
import { RedisSessionStore } from './adapters/redis-session-store.ts';
import { RedisStepUsageStore } from './adapters/redis-step-usage-store.ts';
import { RedisTopicIdRecord } from './adapters/redis-topic-id-record.ts';
import { buildRunnerApp } from './build-app.ts';
import { loadRunnerConfig } from './config.ts';
import { CONTEXT_ROW_PROGRESS_CONFIG, CONTEXT_ROW_PROGRESS_TOPIC, startContextRowRelay } from './context-row-relay.ts';
import { createEngine } from './create-engine.ts';
import { deliveryReceipts } from './delivery-receipts.ts';
import { inspectorRoutes } from './http/inspector-routes.ts';
import type { MemoryRecall } from './ports/memory-recall.ts';
import type { RowOutbox } from './ports/row-outbox.ts';
import type { SessionFeedData } from './ports/session-feed-data.ts';
import type { SessionStore } from './ports/session-store.ts';
import { startReceiptWebhook } from './receipt-webhook.ts';
import { startStepRequestConsumer } from './step-request-consumer.ts';

/**
 * The session-runner as its own process: Redis store, Kafka step requests, the
 * step-context service as its feed hook (HTTP). Its port serves the whole
 * public contract, as the embedded app does: the subscription routes too
 * (@ctxflow/subscriptions, on the same Redis keys step-context's consumer
 * matches updates against), with this runner's sessions as the owner
 * directory, and, with KAFKA_BROKERS and feed secrets, the feeds
 * (@ctxflow/feeds), published to the ticket-updates topic as the
 * feed-ingestor does (the same delivery ledger keys on the same Redis: a
 * delivery sent to both is published once).
 */
await runService({
  name: 'session-runner',
  loadConfig: loadRunnerConfig,
  startTelemetry: () => startTelemetry({ serviceName: 'ctxflow-session-runner' }),
  async start({ config, logger, telemetry, lifecycle, connect }) {
    const identity = createIdentity(config.identity, { log: logger, audit: createAuditLog(logger) });

    const redis = connectRedis(config);
    if (redis) await connect('Redis', config.redisSecurity, () => verifyRedis(redis));
    const ttlMs = config.sessionTtlMs;
    // The store writes committed rows to an outbox in the commit's write: every row with
    // CTXFLOW_CONTEXT_ROW_EVENTS, else the hook rows that carry ticket updates (the receipts').
    const events = config.contextRowEvents;
    const shards = config.contextRowShards;
    const redisOutbox = redis
      ? new RedisRowOutbox(redis, {
          prefix: config.redisPrefix,
          owner: `${hostname()}:${config.port}`,
          events,
          shards,
        })
      : undefined;
    // Without Redis, the in-memory store's.
    const memoryOutbox = new MemoryRowOutbox({ events, shards });
    const outbox: RowOutbox = redisOutbox ?? memoryOutbox;
    const retention = {
      requestIdsKept: config.requestIdsKept,
      callIdsKept: config.callIdsKept,
      requestKeysKept: config.requestKeysKept,
    };
    let store: SessionStore = new MemorySessionStore({ ttlMs, ...retention, outbox: memoryOutbox });
    let memory: MemoryRecall | undefined;
    if (redis) {
      store = new RedisSessionStore(redis, {
        prefix: config.redisPrefix,
        ttlMs,
        ...retention,
        ...(redisOutbox ? { outbox: redisOutbox } : {}),
      });
      memory = new RedisMemoryRecall(redis, { prefix: config.redisPrefix });
    }
    const subscriptions: SubscriptionStore = redis
      ? new RedisSubscriptionStore({ redis, prefix: config.redisPrefix, ttlMs })
      : new MemorySubscriptionStore({ ttlMs });
    // Erasing a session erases its subscriptions too (with their feed positions), on the keys
    // step-context reads; the feed streams are shared and hold nothing of a session.
    const feedData: SessionFeedData = {
      eraseSession: (sessionId, tenant) => subscriptions.eraseSession(tenant, sessionId),
    };
    if (!redis) {
      logger.warn('no REDIS_URL: subscriptions made on this port stay in this process; step-context does not see them');
    }
    const directory: SessionDirectory = { tenantOf: async (sessionId) => (await store.getMeta(sessionId))?.tenant };
    const ledger: DeliveryLedger = redis
      ? new RedisDeliveryLedger({ redis, prefix: config.redisPrefix })
      : new MemoryDeliveryLedger();
    const deliveries: DeliveryIndex = redis
      ? new RedisDeliveryIndex({ redis, prefix: config.redisPrefix })
      : new MemoryDeliveryIndex();
    const engine = createEngine({
      store,
      feed: new HttpStepContext(
        config.stepContextUrl,
        config.serviceTokens ? () => config.serviceTokens!.current() : undefined,
      ),
      telemetry: createContextTelemetry(),
      heldSessions: config.heldSessions,
      heldBytes: config.heldBytes,
      callIdsKept: config.callIdsKept,
      feedData,
      ...(memory ? { memory } : {}),
      usage: redis
        ? new RedisStepUsageStore(redis, { prefix: config.redisPrefix, ttlMs })
        : new MemoryStepUsageStore({ ttlMs }),
    });

    const bus = createBus({
      client: config.kafkaClient,
      topicPrefix: config.kafkaTopicPrefix,
      clientId: 'ctxflow-session-runner',
      ...(config.kafkaBrokers ? { brokers: config.kafkaBrokers } : {}),
      ...consumerGroupOptions({
        sessionTimeoutMs: config.kafkaSessionTimeoutMs,
        rebalanceTimeoutMs: config.kafkaRebalanceTimeoutMs,
      }),
      ...kafkaBusSecurity(config.kafkaSecurity),
    });
    const feeds = config.kafkaBrokers !== undefined && Object.keys(config.secrets).length > 0;
    if (!config.kafkaBrokers && Object.keys(config.secrets).length > 0) {
      logger.warn('no KAFKA_BROKERS: the feeds are not served on this port (nothing would consume them)');
    }
    let consumer: Awaited<ReturnType<typeof startStepRequestConsumer>> | undefined;
    if (config.kafkaBrokers) {
      await connect('Kafka', config.kafkaSecurity, () =>
        bus.admin.ensureTopics([
          { name: TOPICS.stepRequests, partitions: 12 },
          { name: TOPICS.stepResults, partitions: 12 },
          { name: TOPICS.stepRequestsDlq, partitions: 12 },
          ...(events ? [{ name: TOPICS.contextRows, partitions: 12 }] : []),
          ...(events
            ? [{ name: CONTEXT_ROW_PROGRESS_TOPIC, partitions: shards, config: CONTEXT_ROW_PROGRESS_CONFIG }]
            : []),
          ...(feeds ? [{ name: TOPICS.ticketUpdates, partitions: 12 }] : []),
        ]),
      );
      consumer = await startStepRequestConsumer({
        engine,
        store,
        subscriber: bus.subscriber,
        publisher: bus.publisher,
        log: logger,
        telemetry: createConsumerLag(),
        offsetReset: config.offsetReset,
        // Beside the offsets: the topic id each partition was begun in (commits on @platformatic/kafka name none).
        topicIds: redis ? new RedisTopicIdRecord(redis, config.redisPrefix) : new MemoryTopicIdRecord(),
        ...(config.groupId ? { groupId: config.groupId } : {}),
      });
    }

    // CTXFLOW_RECEIPT_URL: the receipts the relay records go to `receipts.sink`; the sender calls the webhook.
    const receipts = startReceiptWebhook({
      webhook: config.receiptWebhook,
      redis,
      prefix: config.redisPrefix,
      log: logger,
    });
    // On the in-memory bus (no KAFKA_BROKERS) the events stay in this process. Events off: the
    // relay publishes nothing and only records the receipts.
    const relay = startContextRowRelay({
      outbox,
      ...(events ? { publisher: bus.publisher } : {}),
      onEntries: deliveryReceipts({ index: deliveries, sink: receipts.sink }),
      // With Kafka transactions: one transactional id per shard, named after the outbox's keys.
      ...(events && config.kafkaBrokers
        ? { transactions: bus.transactions, transactionalIdPrefix: config.redisPrefix }
        : {}),
      telemetry: createRelayTelemetry(),
      log: logger,
    });

    const app = buildRunnerApp({
      engine,
      authenticate: identity.authenticate,
      limits: {
        ...(config.ratePerMinute !== undefined
          ? { rate: { perMinute: config.ratePerMinute, prefix: config.redisPrefix, ...(redis ? { redis } : {}) } }
          : {}),
        ...(config.maxSessions !== undefined ? { maxSessions: config.maxSessions } : {}),
      },
      logger,
      metricsText: () => telemetry.metricsText(),
      protectedRoutes: [
        async (scope) => {
          await subscriptionRoutes(scope, { subscriptions, directory });
          await deliveryRoutes(scope, { deliveries, ledger, sessions: directory });
        },
      ],
      openRoutes: [
        inspectorRoutes,
        ...(feeds
          ? [
              async (scope: FastifyInstance) => {
                await scope.register(feedRoutes, {
                  publisher: bus.publisher,
                  ledger,
                  secrets: config.secrets,
                  telemetry: createFeedTelemetry(),
                });
              },
            ]
          : []),
      ],
      readiness: {
        accepting: () => lifecycle.notStopping(),
        ...(redis ? { redis: withinMs(() => redis.ping(), 2_000) } : {}),
        ...(consumer ? { kafka: withinMs(() => consumer.ready(), 2_000) } : {}),
      },
    });
    return {
      app, // closed first: new requests refused; in-flight HTTP steps commit and answer
      close: [
        { name: 'consumer', run: async () => consumer?.close() }, // the in-flight step request finishes, offsets commit
        { name: 'relay', run: () => relay.close() }, // the batch in flight is recorded, published and removed
        { name: 'receipt-sender', run: () => receipts.close() }, // calls in flight are put back in the queue
        { name: 'publisher', run: () => bus.publisher.close() },
        { name: 'admin', run: () => bus.admin.close() },
        { name: 'redis', run: async () => redis?.disconnect() },
        { name: 'key-file', run: async () => identity.close() },
      ],
      listening: { redis: Boolean(redis), kafka: Boolean(config.kafkaBrokers) },
    };
  },
});
