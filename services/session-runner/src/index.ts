export { HttpStepContext } from './adapters/http-step-context.ts';
export { MemoryMemoryRecall } from './adapters/memory-memory-recall.ts';
export { MemoryReceiptQueue, type MemoryReceiptQueueOptions } from './adapters/memory-receipt-queue.ts';
export { MemoryRowOutbox } from './adapters/memory-row-outbox.ts';
export { MemorySessionEvents } from './adapters/memory-session-events.ts';
export { MemorySessionStore } from './adapters/memory-session-store.ts';
export { MemoryStepUsageStore, type MemoryStepUsageStoreOptions } from './adapters/memory-step-usage-store.ts';
export { MemoryTopicIdRecord } from './adapters/memory-topic-id-record.ts';
export {
  type ContextTelemetry,
  createConsumerLag,
  createContextTelemetry,
  noopContextTelemetry,
  type PassSpan,
} from './adapters/otel-runner-telemetry.ts';
export { RedisReceiptQueue, type RedisReceiptQueueOptions } from './adapters/redis-receipt-queue.ts';
export { RedisRowOutbox, type RedisRowOutboxOptions } from './adapters/redis-row-outbox.ts';
export { RedisSessionStore, type RedisSessionStoreOptions } from './adapters/redis-session-store.ts';
export { RedisStepUsageStore, type RedisStepUsageStoreOptions } from './adapters/redis-step-usage-store.ts';
export { RedisTopicIdRecord } from './adapters/redis-topic-id-record.ts';
export { weakMessageMemo } from './adapters/weak-message-memo.ts';
export type { RunnerAppDeps } from './build-app.ts';
export { buildRunnerApp } from './build-app.ts';
export { loadRunnerConfig, type RunnerConfig } from './config.ts';
export {
  type ContextRowRelay,
  type ContextRowRelayDeps,
  contextRowEventData,
  contextRowRecord,
  startContextRowRelay,
} from './context-row-relay.ts';
export { createEngine, type EngineDeps } from './create-engine.ts';
export { type DeliveryReceiptsDeps, deliveryReceipts, receiptsOf } from './delivery-receipts.ts';
export type {
  AgentInput,
  MessageInput,
  NeutralStepResult,
  PendingCall,
  StepResult,
  ToolDecision,
} from './domain/context-engine.ts';
export { ContextEngine } from './domain/context-engine.ts';
export type * from './domain/model.ts';
export type { ModelMessage, ModelRequest } from './domain/model-request.ts';
export type {
  AnthropicMessage,
  AnthropicRequest,
  CachedPrefix,
  MessageMemo,
  OpenAIChatMessage,
  OpenAIChatRequest,
  OpenAIResponsesInputItem,
  OpenAIResponsesRequest,
  ProviderFormat,
  ProviderFormats,
  ProviderRequests,
} from './domain/provider-formats/index.ts';
export {
  ANTHROPIC_MAX_BREAKPOINTS,
  anthropicPrefix,
  cachedPrefix,
  chatPrefix,
  convertEachTime,
  PROVIDER_FORMATS,
  prefixShare,
  providerFormats,
  providerOrder,
  quotedTurn,
  responsesPrefix,
  toAnthropic,
  toOpenAIChat,
  toOpenAIResponses,
  toProviderRequest,
} from './domain/provider-formats/index.ts';
export type { ProviderCacheSummary, StepUsage, UsageFormat, UsageReport } from './domain/provider-usage.ts';
export { inspectorRoutes } from './http/inspector-routes.ts';
/** The zod schemas of the request bodies (the OpenAPI document and the client's types follow them). */
export * as bodySchemas from './http/schemas.ts';
export {
  boundedReplay,
  DEFAULT_STREAM_LIMITS,
  SHUTDOWN_FRAME,
  STREAM_BUFFER_BYTES,
  STREAM_REPLAY_BYTES,
  StreamFollowers,
  type StreamLimits,
  sseFrame,
  truncatedFrame,
} from './http/stream-followers.ts';
export type { Clock } from './ports/clock.ts';
export { systemClock } from './ports/clock.ts';
export type { MemoryRecall } from './ports/memory-recall.ts';
export type { DeadReceipt, QueuedReceipt, ReceiptQueue } from './ports/receipt-queue.ts';
export { receiptId } from './ports/receipt-queue.ts';
export type { ReceiptSink } from './ports/receipt-sink.ts';
export { noReceiptSink } from './ports/receipt-sink.ts';
export { carriesTicketUpdates, type OutboxEntry, outboxRows, type RowOutbox } from './ports/row-outbox.ts';
export type { SessionEvents } from './ports/session-events.ts';
export type { SessionFeedData } from './ports/session-feed-data.ts';
export type {
  CommitResult,
  EnqueueDedupe,
  EnqueueResult,
  RewindCommit,
  SessionStore,
  StepCommit,
  Written,
} from './ports/session-store.ts';
export type { StepContextRequest, StepContextSource } from './ports/step-context-source.ts';
export type { RecordedUsage, StepUsageStore } from './ports/step-usage-store.ts';
export type { RunnerTelemetry } from './ports/telemetry.ts';
export { noopRunnerTelemetry } from './ports/telemetry.ts';
export type { TopicIdRecord } from './ports/topic-id-record.ts';
export { type ReceiptWebhookConfig, receiptWebhookOf, receiptWebhookVars } from './receipt-config.ts';
export {
  createReceiptTelemetry,
  RECEIPT_EVENT_TYPE,
  type ReceiptOutcome,
  type ReceiptSender,
  type ReceiptSenderDeps,
  type ReceiptTelemetry,
  receiptBody,
  retryAfterMs,
  startReceiptSender,
} from './receipt-sender.ts';
export { type ReceiptWebhook, startReceiptWebhook } from './receipt-webhook.ts';
export type { ConsumerLag, StepRequestConsumerDeps, StepResultRecord } from './step-request-consumer.ts';
export { STEP_CONSUMER_GROUP, startStepRequestConsumer } from './step-request-consumer.ts';
