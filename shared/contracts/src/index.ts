export type { CloudEventContext, CloudEventLike } from './cloudevents.ts';
export {
  CLOUDEVENT_TENANT_ATTRIBUTE,
  CLOUDEVENT_TYPE_PREFIX,
  CLOUDEVENTS_SOURCE,
  cloudEventDataSchema,
  REQUIRED_CLOUDEVENT_ATTRIBUTES,
  requireCloudEventAttributes,
  ticketUpdateFromCloudEvent,
  validateCloudEvent,
} from './cloudevents.ts';
export type {
  ContextItem,
  ContextKind,
  ContextRow,
  Cursor,
  ItemOrigin,
  RowSource,
  SourcedItem,
  TicketUpdateRef,
} from './context-items.ts';
export {
  byteLength,
  CONTEXT_KINDS,
  contextItemSchema,
  cursorSchema,
  FINISH_TOOL,
  hookItemSchema,
  MAX_ITEM_BYTES,
  ROW_SOURCES,
  ticketUpdateRefSchema,
  validateItems,
} from './context-items.ts';
export type { ContextRowEventData } from './context-row-event.ts';
export {
  CONTEXT_ROW_EVENT_TYPE,
  contextRowEventDataSchema,
  contextRowEventHeadersSchema,
  contextRowEventSource,
} from './context-row-event.ts';
export type { DeadLetterReason, DeadLetterSource } from './dead-letters.ts';
export {
  DEAD_LETTER_REASONS,
  DLQ_HEADERS,
  DLQ_TOPIC_OF,
  deadLetterHeadersSchema,
  deadLetterOf,
  MAX_DLQ_ERROR_LENGTH,
  replayMarkerHeadersSchema,
} from './dead-letters.ts';
export type { ErrorBody, ErrorCode } from './errors.ts';
export { CtxflowError, errorBody, errorCodes, isCtxflowError, validationRefusal } from './errors.ts';
export {
  capText,
  idSchema,
  jsonDepthWithin,
  MAX_BATCH_BYTES,
  MAX_CACHE_TTL_MS,
  MAX_CONTEXT_BLOCKS,
  MAX_CONTEXT_BODY_BYTES,
  MAX_CONTEXT_BYTES,
  MAX_DEADLINE_MS,
  MAX_ERROR_DETAIL_LENGTH,
  MAX_ERROR_DETAILS,
  MAX_ERROR_MESSAGE_LENGTH,
  MAX_ID_LENGTH,
  MAX_JSON_DEPTH,
} from './limits.ts';
export type {
  CacheHints,
  ModelRequest,
  RequestMessage,
  RequestTool,
  RequestToolCall,
  RowRef,
  ToolChoice,
} from './model-request.ts';
export type { StepFormat, StepMode, StepRequest, StepResultRecordWire } from './steps.ts';
export {
  contextRowSchema,
  STEP_FORMATS,
  STEP_MODES,
  sinceSchema,
  stepRequestRecordSchema,
  stepRequestSchema,
  stepResultRecordSchema,
} from './steps.ts';
export type { BuiltinFeedSource, FeedSource, TicketChange, TicketUpdate } from './ticket-update.ts';
export {
  DEFAULT_TENANT,
  FEED_SOURCE_NAME,
  FEED_SOURCES,
  feedSourceSchema,
  isBuiltinFeedSource,
  ticketChangeSchema,
  ticketKey,
  ticketUpdateRecordSchema,
  ticketUpdateSchema,
  updateTenant,
} from './ticket-update.ts';
export type { TopicName } from './topics.ts';
export { RECORD_ID_HEADER, recordHeadersSchema, TOPICS } from './topics.ts';
