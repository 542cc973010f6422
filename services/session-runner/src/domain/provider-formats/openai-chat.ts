import type { CacheHints, ModelRequest, RequestTool } from '@ctxflow/contracts';
import { convertEachTime, type MessageMemo } from './message-memo.ts';
import { type ProviderMessage, providerOrder, quotedTurn } from './provider-order.ts';

/*
 * OpenAI Chat Completions request body (POST /v1/chat/completions), without `model`:
 *
 *   { "messages": [{ "role": "system" | "user", "content": "..." },
 *                  { "role": "assistant", "content": null,
 *                    "tool_calls": [{ "id": "c1", "type": "function",
 *                                     "function": { "name": "lookup", "arguments": "{\"q\":1}" } }] },
 *                  { "role": "tool", "tool_call_id": "c1", "content": "..." }],
 *     "tools": [{ "type": "function", "function": { "name", "description", "parameters", "strict" } }],
 *     "tool_choice": { "type": "allowed_tools",
 *                      "allowed_tools": { "mode": "auto", "tools": [{ "type": "function", "function": { "name" } }] } },
 *     "prompt_cache_key": "..." }
 *
 * Rules kept: a `tool` message follows the assistant message whose `tool_calls` holds its
 * `tool_call_id`, every call answered before the next non-tool message; the assistant's
 * `content` may be null only with `tool_calls`. `tools` is every declared tool on every
 * request (the cached prefix never changes); the active set goes in `tool_choice`.
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

function convert(message: ProviderMessage): OpenAIChatMessage {
  switch (message.role) {
    case 'system':
      return { role: 'system', content: message.content };
    case 'user':
      return { role: 'user', content: message.content };
    case 'tool':
      return { role: 'tool', content: message.content, tool_call_id: message.callId };
    case 'assistant': {
      const calls = message.toolCalls;
      if (calls === undefined || calls.length === 0) return { role: 'assistant', content: message.content };
      return {
        role: 'assistant',
        content: message.content.length > 0 ? message.content : null,
        tool_calls: calls.map((c) => ({
          id: c.callId,
          type: 'function',
          function: { name: c.name, arguments: c.arguments },
        })),
      };
    }
  }
}

function chatTool(tool: RequestTool): OpenAIChatTool {
  const fn: OpenAIChatTool['function'] = { name: tool.name };
  if (tool.description !== undefined) fn.description = tool.description;
  if (tool.parameters !== undefined) fn.parameters = tool.parameters;
  if (tool.strict !== undefined) fn.strict = tool.strict;
  return { type: 'function', function: fn };
}

/**
 * `tool_choice`: the forced tool (forced completion) by name; else the active set as
 * `allowed_tools`, so the `tools` list (and the cached prefix) stays the same; `none`
 * when no tool is active.
 */
function chatToolChoice(request: ModelRequest): OpenAIChatToolChoice {
  if (request.toolChoice !== 'auto') return { type: 'function', function: { name: request.toolChoice.name } };
  if (request.activeTools.length === 0) return 'none';
  return {
    type: 'allowed_tools',
    allowed_tools: {
      mode: 'auto',
      tools: request.activeTools.map((name) => ({ type: 'function', function: { name } })),
    },
  };
}

/**
 * The Chat Completions body of a neutral request (spread into `chat.completions.create({ model,
 * ...body })`), with the messages converted through `memo`.
 */
export function openAIChatFormat(memo: MessageMemo): (request: ModelRequest, cache: CacheHints) => OpenAIChatRequest {
  const chatMessage = memo(convert);
  const quote = memo(quotedTurn);
  return (request, cache) => {
    const messages = providerOrder(request.messages, quote).map(chatMessage);
    if (request.tools.length === 0) return { messages, prompt_cache_key: cache.key };
    return {
      messages,
      tools: request.tools.map(chatTool),
      tool_choice: chatToolChoice(request),
      prompt_cache_key: cache.key,
    };
  };
}

/** toOpenAIChat's body of a neutral request, each message converted every time (pure). */
export const toOpenAIChat = openAIChatFormat(convertEachTime);
