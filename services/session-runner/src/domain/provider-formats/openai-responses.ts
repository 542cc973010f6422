import type { CacheHints, ModelRequest, RequestTool } from '@ctxflow/contracts';
import { convertEachTime, type MessageMemo } from './message-memo.ts';
import { type ProviderMessage, providerOrder, quotedTurn } from './provider-order.ts';

/*
 * OpenAI Responses request body (POST /v1/responses), without `model`:
 *
 *   { "input": [{ "type": "message", "role": "system" | "user" | "assistant", "content": "..." },
 *               { "type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{\"q\":1}" },
 *               { "type": "function_call_output", "call_id": "c1", "output": "..." }],
 *     "tools": [{ "type": "function", "name", "description", "parameters", "strict" }],
 *     "tool_choice": { "type": "allowed_tools", "mode": "auto", "tools": [{ "type": "function", "name" }] },
 *     "prompt_cache_key": "..." }
 *
 * The system prefix is the first `input` item (a system message), not `instructions`: then
 * `input` alone is the whole conversation in order, and every request's `input` is a prefix of
 * the next request's, the same property as the neutral `messages` (`instructions` would be a
 * second field to keep equal, and agent frameworks rewrite it per call).
 * An assistant turn is its text (omitted when empty) then one `function_call` per call; each
 * result is a `function_call_output` with the same `call_id` (there is no `tool` role).
 * `parameters` and `strict` are required by the API: a tool without a schema sends `null`,
 * and `strict` is `false` unless declared (the API's own default would be `true`).
 */

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

function convert(message: ProviderMessage): OpenAIResponsesInputItem[] {
  switch (message.role) {
    case 'system':
    case 'user':
      return [{ type: 'message', role: message.role, content: message.content }];
    case 'tool':
      return [{ type: 'function_call_output', call_id: message.callId, output: message.content }];
    case 'assistant': {
      const calls = message.toolCalls;
      if (calls === undefined || calls.length === 0)
        return [{ type: 'message', role: 'assistant', content: message.content }];
      const items: OpenAIResponsesInputItem[] =
        message.content.length > 0 ? [{ type: 'message', role: 'assistant', content: message.content }] : [];
      for (const c of calls)
        items.push({ type: 'function_call', call_id: c.callId, name: c.name, arguments: c.arguments });
      return items;
    }
  }
}

function responsesTool(tool: RequestTool): OpenAIResponsesTool {
  const parameters = tool.parameters ?? null;
  const strict = tool.strict ?? false;
  return tool.description === undefined
    ? { type: 'function', name: tool.name, parameters, strict }
    : { type: 'function', name: tool.name, description: tool.description, parameters, strict };
}

/** The forced tool by name; else the active set as `allowed_tools` (the `tools` list never changes). */
function responsesToolChoice(request: ModelRequest): OpenAIResponsesToolChoice {
  if (request.toolChoice !== 'auto') return { type: 'function', name: request.toolChoice.name };
  if (request.activeTools.length === 0) return 'none';
  return {
    type: 'allowed_tools',
    mode: 'auto',
    tools: request.activeTools.map((name) => ({ type: 'function', name })),
  };
}

/**
 * The Responses body of a neutral request (spread into `responses.create({ model, ...body })`), with
 * the messages converted through `memo`.
 */
export function openAIResponsesFormat(
  memo: MessageMemo,
): (request: ModelRequest, cache: CacheHints) => OpenAIResponsesRequest {
  const inputItems = memo(convert);
  const quote = memo(quotedTurn);
  return (request, cache) => {
    const input: OpenAIResponsesInputItem[] = [];
    for (const message of providerOrder(request.messages, quote)) input.push(...inputItems(message));
    if (request.tools.length === 0) return { input, prompt_cache_key: cache.key };
    return {
      input,
      tools: request.tools.map(responsesTool),
      tool_choice: responsesToolChoice(request),
      prompt_cache_key: cache.key,
    };
  };
}

/** toOpenAIResponses's body of a neutral request, each message converted every time (pure). */
export const toOpenAIResponses = openAIResponsesFormat(convertEachTime);
