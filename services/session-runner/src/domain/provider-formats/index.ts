import type { CacheHints, ModelRequest } from '@ctxflow/contracts';
import { type AnthropicRequest, anthropicFormat } from './anthropic.ts';
import { anthropicPrefix, type CachedPrefix, chatPrefix, responsesPrefix } from './cached-prefix.ts';
import { convertEachTime, type MessageMemo } from './message-memo.ts';
import { type OpenAIChatRequest, openAIChatFormat } from './openai-chat.ts';
import { type OpenAIResponsesRequest, openAIResponsesFormat } from './openai-responses.ts';

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
export { ANTHROPIC_MAX_BREAKPOINTS, anthropicFormat, toAnthropic } from './anthropic.ts';
export type { CachedPrefix } from './cached-prefix.ts';
export { anthropicPrefix, chatPrefix, prefixShare, responsesPrefix } from './cached-prefix.ts';
export type { MessageMemo } from './message-memo.ts';
export { convertEachTime } from './message-memo.ts';
export type {
  OpenAIChatMessage,
  OpenAIChatRequest,
  OpenAIChatTool,
  OpenAIChatToolCall,
  OpenAIChatToolChoice,
  OpenAIChatToolRef,
} from './openai-chat.ts';
export { openAIChatFormat, toOpenAIChat } from './openai-chat.ts';
export type {
  OpenAIResponsesInputItem,
  OpenAIResponsesRequest,
  OpenAIResponsesTool,
  OpenAIResponsesToolChoice,
  OpenAIResponsesToolRef,
} from './openai-responses.ts';
export { openAIResponsesFormat, toOpenAIResponses } from './openai-responses.ts';
export { providerOrder, quotedTurn } from './provider-order.ts';

/** The provider formats a step's `request` can take (Contract v2); absent: the neutral request. */
export const PROVIDER_FORMATS = ['openai-chat', 'openai-responses', 'anthropic'] as const;
export type ProviderFormat = (typeof PROVIDER_FORMATS)[number];

/** The request body of each format. */
export interface ProviderRequests {
  'openai-chat': OpenAIChatRequest;
  'openai-responses': OpenAIResponsesRequest;
  anthropic: AnthropicRequest;
}

/** A neutral request in each provider's format. */
export interface ProviderFormats {
  /**
   * A neutral request in a provider's format: that API's request body without `model` (and
   * `max_tokens`). The same request and hints give the same body.
   */
  toProviderRequest<F extends ProviderFormat>(format: F, request: ModelRequest, cache: CacheHints): ProviderRequests[F];
}

/** The provider formats with their messages converted through `memo` (message-memo.ts). */
export function providerFormats(memo: MessageMemo): ProviderFormats {
  const chat = openAIChatFormat(memo);
  const responses = openAIResponsesFormat(memo);
  const anthropic = anthropicFormat(memo);
  function toProviderRequest<F extends ProviderFormat>(
    format: F,
    request: ModelRequest,
    cache: CacheHints,
  ): ProviderRequests[F];
  function toProviderRequest(
    format: ProviderFormat,
    request: ModelRequest,
    cache: CacheHints,
  ): ProviderRequests[ProviderFormat] {
    switch (format) {
      case 'openai-chat':
        return chat(request, cache);
      case 'openai-responses':
        return responses(request, cache);
      case 'anthropic':
        return anthropic(request, cache);
    }
  }
  return { toProviderRequest };
}

/** A neutral request in a provider's format, each message converted every time (pure). */
export const { toProviderRequest } = providerFormats(convertEachTime);

/** What each provider caches of a body of its format (cached-prefix.ts). */
export const cachedPrefix: { [F in ProviderFormat]: (body: ProviderRequests[F]) => CachedPrefix } = {
  'openai-chat': chatPrefix,
  'openai-responses': responsesPrefix,
  anthropic: anthropicPrefix,
};
