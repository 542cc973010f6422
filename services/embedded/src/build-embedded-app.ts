import { type Bus, createBus } from '@ctxflow/bus';
import {
  type DeliveryIndex,
  deliveryRoutes,
  type FeedSecrets,
  type FeedTelemetry,
  feedRoutes,
  MemoryDeliveryIndex,
  MemoryDeliveryLedger,
} from '@ctxflow/feeds';
import {
  type Authenticate,
  closeHttp,
  createAuthenticator,
  DEFAULT_SHUTDOWN_GRACE_MS,
  HTTP_GRACE_SHARE,
  type Logger,
} from '@ctxflow/service-kit';
import {
  buildRunnerApp,
  type Clock,
  type ContextTelemetry,
  createEngine,
  deliveryReceipts,
  inspectorRoutes,
  MemoryRowOutbox,
  MemorySessionStore,
  MemoryStepUsageStore,
  type ReceiptWebhook,
  type ReceiptWebhookConfig,
  type RowOutbox,
  type SessionStore,
  type StepUsageStore,
  startContextRowRelay,
  startReceiptWebhook,
  systemClock,
} from '@ctxflow/session-runner';
import {
  type ConsumerTelemetry,
  FeedStepContext,
  type FeedStreams,
  MemoryFeedStreams,
  StepContextService,
} from '@ctxflow/step-context';
import { MemorySubscriptionStore, type SubscriptionStore, subscriptionRoutes } from '@ctxflow/subscriptions';
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { EmbeddedConfig } from './config.ts';

export interface EmbeddedDeps {
  /** `secrets`: a plain string is the single-tenant default's secret (feed-secrets.ts). */
  /** `sessionTtlMs`: CTXFLOW_SESSION_TTL_MS (default 0 here: sessions are kept until deleted). */
  /** `ratePerMinute`, `maxSessions`: CTXFLOW_RATE_LIMIT_PER_MINUTE, CTXFLOW_TENANT_MAX_SESSIONS (absent: none). */
  config: Pick<EmbeddedConfig, 'apiKeys'> & {
    secrets: FeedSecrets;
    sessionTtlMs?: number;
    ratePerMinute?: number | undefined;
    maxSessions?: number | undefined;
    /** CTXFLOW_CONTEXT_ROW_EVENTS: committed rows as CloudEvents on TOPICS.contextRows of the in-process bus (with `stores`: its outbox's). */
    contextRowEvents?: boolean;
    /** CTXFLOW_RECEIPT_URL and its secret: the receipt webhook, on an in-process queue. */
    receiptWebhook?: ReceiptWebhookConfig | undefined;
  };
  logger?: Logger;
  /** The callers' credentials (createIdentity); default: `config.apiKeys` (CTXFLOW_API_KEYS). */
  authenticate?: Authenticate;
  telemetry?: ContextTelemetry;
  /** The feed routes' spans and ingest/refusal counters. */
  feedTelemetry?: FeedTelemetry;
  /** step-context's apply spans and consumer lag. */
  consumerTelemetry?: ConsumerTelemetry;
  metricsText?: () => Promise<string>;
  clock?: Clock;
  /**
   * Other stores in place of the in-memory ones (tests run the same app on Redis); the
   * feed stream store must append only to subscribed sessions, as the memory default does.
   */
  stores?: {
    sessions: SessionStore;
    feedStreams: FeedStreams;
    subscriptions: SubscriptionStore;
    usage?: StepUsageStore;
    /** The outbox `sessions` writes its commits' rows to (the receipts, the events); absent: none is relayed. */
    outbox?: RowOutbox;
    /** The delivery index the receipts go to; default in memory. */
    deliveries?: DeliveryIndex;
  };
  /** More route plugins without credentials, after the feeds (the benchmark adds its baseline route). */
  openRoutes?: ((app: FastifyInstance) => Promise<void>)[];
  /** Called with every route the app registers. */
  onRoute?: (route: RouteOptions) => void;
}

export interface EmbeddedApp {
  app: FastifyInstance;
  /** The step-context feed streams (tests wait on them for a published update to land). */
  feedStreams: FeedStreams;
  /** The step-context subscriptions (with the feed position each started at). */
  subscriptions: SubscriptionStore;
  /** The in-memory bus the feeds publish on and step-context consumes (dead letters included). */
  bus: Bus;
  /** The receipt webhook: `receipts.sink` takes the receipts the relay records. */
  receipts: ReceiptWebhook;
  /**
   * Stops HTTP (open streams end with a `shutdown` event; connections still
   * open after `forceAfterMs`, default half of DEFAULT_SHUTDOWN_GRACE_MS, are
   * closed), then the consumer and the bus.
   */
  close(options?: { forceAfterMs?: number }): Promise<void>;
}

/**
 * The embedded default: feed-ingestor, step-context and session-runner in one
 * process on in-memory adapters, one HTTP server. Never listens.
 */
export async function buildEmbeddedApp(deps: EmbeddedDeps): Promise<EmbeddedApp> {
  const clock = deps.clock ?? systemClock;
  const bus = createBus({ client: 'platformatic', clientId: 'ctxflow-embedded' });
  // Every store of a session keeps it for the same retention, on the same clock; updates
  // are stored only in streams some session follows (an erased session follows none).
  const ttlMs = deps.config.sessionTtlMs ?? 0;
  const memorySubscriptions = new MemorySubscriptionStore({ ttlMs, clock });
  // Committed rows go to an in-process outbox in the commit's own write: every row with
  // CTXFLOW_CONTEXT_ROW_EVENTS (relayed onto the bus), else those that carry ticket updates (receipts).
  const events = deps.config.contextRowEvents === true;
  const memoryOutbox = deps.stores ? undefined : new MemoryRowOutbox({ events });
  const outbox: RowOutbox | undefined = deps.stores ? deps.stores.outbox : memoryOutbox;
  const deliveries = deps.stores?.deliveries ?? new MemoryDeliveryIndex();
  const {
    sessions: store,
    feedStreams,
    subscriptions,
    usage = new MemoryStepUsageStore({ ttlMs, clock }),
  } = deps.stores ?? {
    sessions: new MemorySessionStore({ ttlMs, clock, ...(memoryOutbox ? { outbox: memoryOutbox } : {}) }),
    subscriptions: memorySubscriptions,
    feedStreams: new MemoryFeedStreams({ ttlMs, clock, subscriptions: memorySubscriptions }),
  };
  const feed = new FeedStepContext({ feedStreams, subscriptions });
  const engine = createEngine({
    store,
    clock,
    feed,
    feedData: feed,
    usage,
    ...(deps.telemetry ? { telemetry: deps.telemetry } : {}),
  });
  const ledger = new MemoryDeliveryLedger();
  const stepContext = new StepContextService({
    subscriber: bus.subscriber,
    // Poison ticket updates go to TOPICS.ticketUpdatesDlq on the in-memory bus, as on Kafka.
    deadLetters: bus.publisher,
    feedStreams,
    subscriptions,
    ...(deps.logger ? { log: deps.logger } : {}),
    ...(deps.consumerTelemetry ? { telemetry: deps.consumerTelemetry } : {}),
  });
  await stepContext.start();
  // CTXFLOW_RECEIPT_URL: the receipts the relay records go to `receipts.sink`; the sender calls the webhook.
  const receipts = startReceiptWebhook({
    webhook: deps.config.receiptWebhook,
    ...(deps.logger ? { log: deps.logger } : {}),
  });
  const relay = outbox
    ? startContextRowRelay({
        outbox,
        ...(events ? { publisher: bus.publisher } : {}),
        onEntries: deliveryReceipts({ index: deliveries, sink: receipts.sink }),
        ...(deps.logger ? { log: deps.logger } : {}),
      })
    : undefined;
  const directory = { tenantOf: async (sessionId: string) => (await store.load(sessionId))?.meta.tenant };
  const app = buildRunnerApp({
    engine,
    authenticate: deps.authenticate ?? createAuthenticator(deps.config.apiKeys),
    limits: {
      ...(deps.config.ratePerMinute !== undefined ? { rate: { perMinute: deps.config.ratePerMinute } } : {}),
      ...(deps.config.maxSessions !== undefined ? { maxSessions: deps.config.maxSessions } : {}),
    },
    ...(deps.logger ? { logger: deps.logger } : {}),
    ...(deps.metricsText ? { metricsText: deps.metricsText } : {}),
    ...(deps.onRoute ? { onRoute: deps.onRoute } : {}),
    protectedRoutes: [
      async (scope) => {
        await subscriptionRoutes(scope, { subscriptions, directory });
        await deliveryRoutes(scope, { deliveries, ledger, sessions: directory });
      },
    ],
    openRoutes: [
      inspectorRoutes,
      async (scope) => {
        await scope.register(feedRoutes, {
          publisher: bus.publisher,
          ledger,
          secrets: deps.config.secrets,
          clock: () => clock.now(),
          ...(deps.feedTelemetry ? { telemetry: deps.feedTelemetry } : {}),
        });
      },
      ...(deps.openRoutes ?? []),
    ],
  });
  await app.ready();
  return {
    app,
    feedStreams,
    subscriptions,
    bus,
    receipts,
    async close(options = {}) {
      await closeHttp(app, options.forceAfterMs ?? DEFAULT_SHUTDOWN_GRACE_MS * HTTP_GRACE_SHARE);
      await stepContext.stop();
      await relay?.close();
      await receipts.close();
      await bus.publisher.close();
    },
  };
}
