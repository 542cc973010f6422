/**
 * The provider formats of a step (`format: "openai-chat" | "openai-responses" | "anthropic"`), typed by
 * the official SDKs (`openai`, `@anthropic-ai/sdk`: optional peers, types only). A step's `request` is
 * that SDK's request params without `model` (and `max_tokens`): spread it into the SDK's call.
 */
import type { Message, MessageCreateParamsNonStreaming } from '@anthropic-ai/sdk/resources/messages';
import type { ChatCompletion, ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import type { Response, ResponseCreateParamsNonStreaming } from 'openai/resources/responses/responses';

/** The formats besides the neutral request. */
export type ProviderFormat = 'openai-chat' | 'openai-responses' | 'anthropic';

/** `openai.chat.completions.create({ model, ...request })`. */
export type OpenAIChatRequest = Omit<ChatCompletionCreateParamsNonStreaming, 'model'>;
/** `openai.responses.create({ model, ...request })`. */
export type OpenAIResponsesRequest = Omit<ResponseCreateParamsNonStreaming, 'model'>;
/** `anthropic.messages.create({ model, max_tokens, ...request })`. */
export type AnthropicRequest = Omit<MessageCreateParamsNonStreaming, 'model' | 'max_tokens'>;

/** The `request` of a step in each provider format. */
export interface ProviderRequests {
  'openai-chat': OpenAIChatRequest;
  'openai-responses': OpenAIResponsesRequest;
  anthropic: AnthropicRequest;
}

/** What each format's SDK call answers. */
export interface ProviderAnswers {
  'openai-chat': ChatCompletion;
  'openai-responses': Response;
  anthropic: Message;
}
