export { type CallOptions, CtxflowClient, type CtxflowClientOptions } from './client.ts';
export { type FollowOptions, followStream, type StreamEvent } from './follow.ts';
export {
  allowedTools,
  type Conversation,
  type ConversationMessage,
  conversation,
  FINISH_TOOL,
  orphanText,
  parseArguments,
  type RefusalReason,
  refusalText,
} from './messages.ts';
export type * from './provider-types.ts';
export { CtxflowApiError } from './transport.ts';
export type * from './types.ts';
