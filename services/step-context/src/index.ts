export type {
  AppendOutcome,
  ApplyResult,
  BatchEntry,
  BatchRecord,
  BatchStore,
  ConsumedPosition,
  TicketMark,
} from './batch-store.ts';
export type { StepContextAppDeps } from './build-app.ts';
export { buildStepContextApp } from './build-app.ts';
export type { StepContextConfig } from './config.ts';
export { loadStepContextConfig, stepContextConfigSchema } from './config.ts';
export { type ConsumerTelemetry, createConsumerTelemetry, noopConsumerTelemetry } from './consumer-telemetry.ts';
export type { FeedBatch, FeedItem, FeedRequest } from './feed-step-context.ts';
export { FeedStepContext } from './feed-step-context.ts';
export { HttpSessionDirectory } from './http-session-directory.ts';
export { MemoryBatchStore } from './memory-batch-store.ts';
export { MemorySubscriptionStore } from './memory-subscription-store.ts';
export { RedisBatchStore } from './redis-batch-store.ts';
export type { StepContextKeys } from './redis-keys.ts';
export { stepContextKeys } from './redis-keys.ts';
export { RedisSubscriptionStore } from './redis-subscription-store.ts';
export type { SessionDirectory } from './session-directory.ts';
export type { StepContextRoutesDeps } from './step-context-routes.ts';
export { stepContextRoutes } from './step-context-routes.ts';
export type { ServiceLog, StepContextServiceDeps } from './step-context-service.ts';
export { RECORD_ID_HEADER, STEP_CONTEXT_GROUP, StepContextService } from './step-context-service.ts';
export type { SubscriptionRoutesDeps } from './subscription-routes.ts';
export { subscriptionBodySchema, subscriptionRoutes } from './subscription-routes.ts';
export type { Subscription, SubscriptionStore, UpdateTarget } from './subscription-store.ts';
export { type ParsedRecord, parseTicketUpdateRecord } from './ticket-update-record.ts';
