import type { CacheHints, ModelRequest } from '@ctxflow/contracts';
import { type AnthropicRequest, toAnthropic } from './anthropic.ts';
import { anthropicPrefix, type CachedPrefix, chatPrefix, responsesPrefix } from './cached-prefix.ts';
import { type OpenAIChatRequest, toOpenAIChat } from './openai-chat.ts';
import { type OpenAIResponsesRequest, toOpenAIResponses } from './openai-responses.ts';

export type {
  AnthropicCacheControl,
  AnthropicMessage,
  AnthropicRequest,
  AnthropicTextBlock,
  AnthropicTool,
  AnthropicToolChoice,
  AnthropicToolResultBlock,
  AnthropicToolUseBlock,
} from './anthropic.ts';
export { ANTHROPIC_MAX_BREAKPOINTS, toAnthropic } from './anthropic.ts';
export type { CachedPrefix } from './cached-prefix.ts';
export { anthropicPrefix, chatPrefix, prefixShare, responsesPrefix } from './cached-prefix.ts';
export type {
  OpenAIChatMessage,
  OpenAIChatRequest,
  OpenAIChatTool,
  OpenAIChatToolCall,
  OpenAIChatToolChoice,
  OpenAIChatToolRef,
} from './openai-chat.ts';
export { toOpenAIChat } from './openai-chat.ts';
export type {
  OpenAIResponsesInputItem,
  OpenAIResponsesRequest,
  OpenAIResponsesTool,
  OpenAIResponsesToolChoice,
  OpenAIResponsesToolRef,
} from './openai-responses.ts';
export { toOpenAIResponses } from './openai-responses.ts';
export { providerOrder } from './provider-order.ts';

/** The provider formats a step's `request` can take (Contract v2); absent: the neutral request. */
export const PROVIDER_FORMATS = ['openai-chat', 'openai-responses', 'anthropic'] as const;
export type ProviderFormat = (typeof PROVIDER_FORMATS)[number];

/** The request body of each format. */
export interface ProviderRequests {
  'openai-chat': OpenAIChatRequest;
  'openai-responses': OpenAIResponsesRequest;
  anthropic: AnthropicRequest;
}

/**
 * A neutral request in a provider's format: that API's request body without `model` (and
 * `max_tokens`). Pure: the same request and hints give the same body.
 */
export function toProviderRequest<F extends ProviderFormat>(
  format: F,
  request: ModelRequest,
  cache: CacheHints,
): ProviderRequests[F];
export function toProviderRequest(
  format: ProviderFormat,
  request: ModelRequest,
  cache: CacheHints,
): ProviderRequests[ProviderFormat] {
  switch (format) {
    case 'openai-chat':
      return toOpenAIChat(request, cache);
    case 'openai-responses':
      return toOpenAIResponses(request, cache);
    case 'anthropic':
      return toAnthropic(request, cache);
  }
}

/** What each provider caches of a body of its format (cached-prefix.ts). */
export const cachedPrefix: { [F in ProviderFormat]: (body: ProviderRequests[F]) => CachedPrefix } = {
  'openai-chat': chatPrefix,
  'openai-responses': responsesPrefix,
  anthropic: anthropicPrefix,
};
