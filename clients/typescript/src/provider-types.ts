/**
 * The `request` of a step in a provider format (`format: "openai-chat" | "openai-responses" | "anthropic"`):
 * that API's request body without `model` (and `max_tokens`). A test checks them against the server's.
 */

export interface OpenAIChatToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export type OpenAIChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: OpenAIChatToolCall[] }
  | { role: 'tool'; content: string; tool_call_id: string };

export interface OpenAIChatTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
}

/** A tool named in `tool_choice` (a type literal: the SDK takes `{ [key: string]: unknown }` here). */
export type OpenAIChatToolRef = { type: 'function'; function: { name: string } };

export type OpenAIChatToolChoice =
  | 'none'
  | { type: 'allowed_tools'; allowed_tools: { mode: 'auto'; tools: OpenAIChatToolRef[] } }
  | OpenAIChatToolRef;

export interface OpenAIChatRequest {
  messages: OpenAIChatMessage[];
  tools?: OpenAIChatTool[];
  tool_choice?: OpenAIChatToolChoice;
  prompt_cache_key: string;
}

export type OpenAIResponsesInputItem =
  | { type: 'message'; role: 'system' | 'user' | 'assistant'; content: string }
  | { type: 'function_call'; call_id: string; name: string; arguments: string }
  | { type: 'function_call_output'; call_id: string; output: string };

export interface OpenAIResponsesTool {
  type: 'function';
  name: string;
  description?: string;
  parameters: Record<string, unknown> | null;
  strict: boolean;
}

/** A tool named in `tool_choice` (a type literal: the SDK takes `{ [key: string]: unknown }` here). */
export type OpenAIResponsesToolRef = { type: 'function'; name: string };

export type OpenAIResponsesToolChoice =
  | 'none'
  | { type: 'allowed_tools'; mode: 'auto'; tools: OpenAIResponsesToolRef[] }
  | OpenAIResponsesToolRef;

export interface OpenAIResponsesRequest {
  input: OpenAIResponsesInputItem[];
  tools?: OpenAIResponsesTool[];
  tool_choice?: OpenAIResponsesToolChoice;
  prompt_cache_key: string;
}

export interface AnthropicCacheControl {
  type: 'ephemeral';
}

export interface AnthropicTextBlock {
  type: 'text';
  text: string;
  cache_control?: AnthropicCacheControl;
}

export interface AnthropicToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: Record<string, unknown>;
  cache_control?: AnthropicCacheControl;
}

export interface AnthropicToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  /** Absent when the result is empty (an empty text is refused). */
  content?: string;
  cache_control?: AnthropicCacheControl;
}

export type AnthropicMessage =
  | { role: 'user'; content: (AnthropicTextBlock | AnthropicToolResultBlock)[] }
  | { role: 'assistant'; content: (AnthropicTextBlock | AnthropicToolUseBlock)[] };

export interface AnthropicTool {
  name: string;
  description?: string;
  input_schema: { type: 'object'; [key: string]: unknown };
  strict?: boolean;
  cache_control?: AnthropicCacheControl;
}

export type AnthropicToolChoice = { type: 'auto' } | { type: 'tool'; name: string };

export interface AnthropicRequest {
  system?: AnthropicTextBlock[];
  messages: AnthropicMessage[];
  tools?: AnthropicTool[];
  tool_choice?: AnthropicToolChoice;
}
