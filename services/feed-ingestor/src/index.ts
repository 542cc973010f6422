export type { FeedAppDeps } from './build-app.ts';
export { buildFeedApp } from './build-app.ts';
export {
  CE_BATCH,
  CE_STRUCTURED,
  type CloudEventsMode,
  cloudEventUpdates,
  MAX_BATCH_EVENTS,
} from './cloudevents-feed.ts';
export type { FeedConfig } from './config.ts';
export { feedConfigSchema, loadFeedConfig } from './config.ts';
export type { ClaimOutcome, DeliveryLedger } from './delivery-ledger.ts';
export type { FeedRoutesDeps } from './feed-routes.ts';
export { DEFAULT_RETAIN_MS, DEFAULT_RETRY_AFTER_S, feedRoutes } from './feed-routes.ts';
export type { FeedSecrets, SecretProblem, TenantSecret } from './feed-secrets.ts';
export {
  FEED_SECRET_PREFIX,
  feedSecretVar,
  feedSourceOfVar,
  REFINE_ALWAYS,
  readFeedSecrets,
  refineFeedSecrets,
  tenantSecrets,
} from './feed-secrets.ts';
export { createFeedTelemetry, type FeedTelemetry, noopFeedTelemetry } from './feed-telemetry.ts';
export type { Feed } from './feeds.ts';
export { configuredFeed, feedOf } from './feeds.ts';
export { MemoryDeliveryLedger } from './memory-delivery-ledger.ts';
export { RedisDeliveryLedger } from './redis-delivery-ledger.ts';
