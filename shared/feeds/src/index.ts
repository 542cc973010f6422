export { MemoryDeliveryIndex, type MemoryDeliveryIndexOptions } from './adapters/memory-delivery-index.ts';
export { MemoryDeliveryLedger } from './adapters/memory-delivery-ledger.ts';
export { createFeedTelemetry } from './adapters/otel-feed-telemetry.ts';
export { RedisDeliveryIndex, type RedisDeliveryIndexOptions } from './adapters/redis-delivery-index.ts';
export { RedisDeliveryLedger } from './adapters/redis-delivery-ledger.ts';
export {
  CE_BATCH,
  CE_STRUCTURED,
  type CloudEventsMode,
  cloudEventUpdates,
  MAX_BATCH_EVENTS,
} from './domain/cloudevents-feed.ts';
export type { FeedSecrets, SecretProblem, TenantSecret } from './domain/feed-secrets.ts';
export {
  FEED_SECRET_PREFIX,
  feedSecretVar,
  feedSourceOfVar,
  readFeedSecrets,
  refineFeedSecrets,
  tenantSecrets,
} from './domain/feed-secrets.ts';
export type { Feed } from './domain/feeds.ts';
export { configuredFeed, feedOf } from './domain/feeds.ts';
export { type DeliveryRoutesDeps, deliveryRoutes } from './http/delivery-routes.ts';
export type { FeedRoutesDeps } from './http/feed-routes.ts';
export {
  DEFAULT_FEED_MAX_BYTES,
  DEFAULT_LEASE_MS,
  DEFAULT_RETAIN_MS,
  DEFAULT_RETRY_AFTER_S,
  feedRoutes,
} from './http/feed-routes.ts';
export { byCommit, type DeliveryIndex, type DeliveryReceipt } from './ports/delivery-index.ts';
export type { ClaimOutcome, DeliveryLedger, LedgerState } from './ports/delivery-ledger.ts';
export { type FeedTelemetry, noopFeedTelemetry } from './ports/feed-telemetry.ts';
