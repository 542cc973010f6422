export type {
  AppendOutcome,
  ApplyResult,
  BatchEntry,
  BatchRecord,
  BatchStore,
  ConsumedPosition,
  TicketMark,
} from './batch-store.ts';
export { isStale, nextMark } from './batch-store.ts';
export type { StepContextAppDeps } from './build-app.ts';
export { buildStepContextApp } from './build-app.ts';
export type { StepContextConfig } from './config.ts';
export { loadStepContextConfig, stepContextConfigSchema } from './config.ts';
export { type ConsumerTelemetry, createConsumerTelemetry, noopConsumerTelemetry } from './consumer-telemetry.ts';
export type { FeedBatch, FeedItem, FeedRequest } from './feed-step-context.ts';
export { FeedStepContext, fitEntries, MAX_ENTRIES_PER_FETCH, parseCursor } from './feed-step-context.ts';
export { HttpSessionDirectory } from './http-session-directory.ts';
export { MemoryBatchStore } from './memory-batch-store.ts';
export { MemorySubscriptionStore } from './memory-subscription-store.ts';
export { RedisBatchStore } from './redis-batch-store.ts';
export type { StepContextKeys } from './redis-keys.ts';
export { stepContextKeys } from './redis-keys.ts';
export { RedisSubscriptionStore } from './redis-subscription-store.ts';
export type { RenderOptions } from './render-notice.ts';
export { foldChanges, quote, renderNotice } from './render-notice.ts';
export type { SessionDirectory } from './session-directory.ts';
export type { StepContextRoutesDeps } from './step-context-routes.ts';
export { stepContextRoutes } from './step-context-routes.ts';
export type { ServiceLog, StepContextServiceDeps } from './step-context-service.ts';
export {
  MAX_RECORDS_PER_WRITE,
  RECORD_ID_HEADER,
  STEP_CONTEXT_GROUP,
  StepContextService,
} from './step-context-service.ts';
export type { SubscriptionRoutesDeps } from './subscription-routes.ts';
export { subscriptionBodySchema, subscriptionRoutes } from './subscription-routes.ts';
export type { Subscription, SubscriptionStore, UpdateTarget } from './subscription-store.ts';
export { ANY_TICKET, candidateSubscriptions, matchesUpdate, subscriptionId } from './subscription-store.ts';
export { type ParsedRecord, parseTicketUpdateRecord } from './ticket-update-record.ts';
