export { MemoryFeedStreams } from './adapters/memory-feed-streams.ts';
export type { StepContextKeys } from './adapters/redis/keys.ts';
export { stepContextKeys } from './adapters/redis/keys.ts';
export { RedisFeedStreams } from './adapters/redis-feed-streams.ts';
export type { StepContextAppDeps } from './build-app.ts';
export { buildStepContextApp } from './build-app.ts';
export type { StepContextConfig } from './config.ts';
export { loadStepContextConfig, stepContextConfigSchema } from './config.ts';
export { type ConsumerTelemetry, createConsumerTelemetry, noopConsumerTelemetry } from './consumer-telemetry.ts';
export type { FeedBatch, FeedItem, FeedRequest } from './domain/feed-step-context.ts';
export { FeedStepContext } from './domain/feed-step-context.ts';
export {
  checkStoredOffset,
  DEFAULT_OFFSET_RESET,
  OFFSET_RESET_POLICIES,
  type OffsetCheck,
  OffsetGuard,
  type OffsetMismatch,
  type OffsetResetPolicy,
  resetTarget,
} from './domain/offset-check.ts';
export type { ServiceLog, StepContextServiceDeps } from './domain/step-context-service.ts';
export { RECORD_ID_HEADER, STEP_CONTEXT_GROUP, StepContextService } from './domain/step-context-service.ts';
export { type ParsedRecord, parseTicketUpdateRecord } from './domain/ticket-update-record.ts';
export type { StepContextRoutesDeps } from './http/step-context-routes.ts';
export { stepContextRoutes } from './http/step-context-routes.ts';
export type {
  AppendOutcome,
  ApplyResult,
  ConsumedPosition,
  ConsumedRecord,
  FeedEntry,
  FeedPosition,
  FeedStreams,
  StoredPartition,
} from './ports/feed-streams.ts';
