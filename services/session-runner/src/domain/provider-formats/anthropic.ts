import type { CacheHints, ModelRequest, RequestTool } from '@ctxflow/contracts';
import { convertEachTime, type MessageMemo } from './message-memo.ts';
import { type ProviderMessage, providerOrder, quotedTurn, type ToolMessage } from './provider-order.ts';

/*
 * Anthropic Messages request body (POST /v1/messages), without `model` and `max_tokens`:
 *
 *   { "system": [{ "type": "text", "text": "...", "cache_control": { "type": "ephemeral" } }],
 *     "messages": [{ "role": "user", "content": [{ "type": "text", "text": "..." }] },
 *                  { "role": "assistant", "content": [{ "type": "text", "text": "..." },
 *                      { "type": "tool_use", "id": "c1", "name": "lookup", "input": { "q": 1 } }] },
 *                  { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "c1", "content": "..." },
 *                      { "type": "text", "text": "<context ...>" }] }],
 *     "tools": [{ "name", "description", "input_schema": { "type": "object", ... } }],
 *     "tool_choice": { "type": "auto" } | { "type": "tool", "name": "__finish__" } }
 *
 * Rules kept: one top-level `system`; `messages` alternate user and assistant; every `tool_use`
 * has its `tool_result` block, first, in the next user turn; no empty text and no empty turn;
 * `cache_control` on at most 4 blocks.
 *
 * Mapping, chosen so that every request is a prefix of the next at the level of blocks (the
 * unit Anthropic caches by):
 * - the system prefix messages become the top-level `system` text blocks;
 * - user messages, context rows (of either R6 role), and tool results become blocks of a user
 *   turn: appended to the last turn when it is a user turn, else a new user turn. So a context
 *   row stays in the conversation where it was committed (never in the top-level `system`,
 *   which would re-write the cache at every row) and a later message only appends blocks;
 * - an assistant message becomes its text block (omitted when empty or only white space) then one `tool_use` per
 *   call, appended to the last turn when that is an assistant turn (an assistant message with
 *   no text and no call adds nothing);
 * - every declared tool is offered on every request (a switched-off tool stays offered: the
 *   gate refuses its calls and the switch-off row tells the model).
 *
 * Breakpoints (`cache_control: {type: "ephemeral"}`), at most 3: the last system block (the
 * stable prefix; the last tool when there is no system prefix), the block that ended the
 * previous request (`cache.previousEnd`; a sure cache read even when more blocks were added
 * than the lookback reaches), and the last block (written for the next request).
 */

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

const EPHEMERAL: AnthropicCacheControl = Object.freeze({ type: 'ephemeral' });

/** Most breakpoints a request may carry (tools, system and messages together). */
export const ANTHROPIC_MAX_BREAKPOINTS = 4;

/**
 * A call's `input`: the object its arguments text holds. Anything else (text that is not
 * JSON, or JSON that is not an object) gives `{}`: the API takes only an object here.
 */
function callInput(args: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(args);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // not JSON: see above
  }
  return {};
}

function anthropicTool(tool: RequestTool): AnthropicTool {
  const out: AnthropicTool = { name: tool.name, input_schema: { type: 'object', properties: {} } };
  if (tool.description !== undefined) out.description = tool.description;
  // `type` keeps its place in the declared schema (it is "object" for every declared schema).
  if (tool.parameters !== undefined) out.input_schema = { ...tool.parameters, type: 'object' };
  if (tool.strict !== undefined) out.strict = tool.strict;
  return out;
}

/** The API refuses a text block with no visible character ("must contain non-whitespace text"). */
const VISIBLE = /\S/;

type UserBlock = AnthropicTextBlock | AnthropicToolResultBlock;
type AssistantBlock = AnthropicTextBlock | AnthropicToolUseBlock;

/** A neutral message's blocks, and the role of the turn they go to (no block: nothing to send). */
type Converted = { role: 'user'; blocks: UserBlock[] } | { role: 'assistant'; blocks: AssistantBlock[] };

function convert(message: ProviderMessage): Converted {
  switch (message.role) {
    case 'assistant': {
      const blocks: AssistantBlock[] = VISIBLE.test(message.content) ? [{ type: 'text', text: message.content }] : [];
      for (const c of message.toolCalls ?? []) {
        blocks.push({ type: 'tool_use', id: c.callId, name: c.name, input: callInput(c.arguments) });
      }
      return { role: 'assistant', blocks };
    }
    case 'tool':
      return {
        role: 'user',
        blocks: [
          message.content.length > 0
            ? { type: 'tool_result', tool_use_id: message.callId, content: message.content }
            : { type: 'tool_result', tool_use_id: message.callId },
        ],
      };
    default:
      // user messages and context rows (system or user form alike)
      return { role: 'user', blocks: VISIBLE.test(message.content) ? [{ type: 'text', text: message.content }] : [] };
  }
}

/** Where a block is: `messages[turn].content[index]`. */
interface BlockAt {
  turn: number;
  index: number;
}

/** Puts a breakpoint on a block: a marked copy in its place (converted blocks are shared). */
function mark(messages: AnthropicMessage[], at: BlockAt): void {
  const message = messages[at.turn]!;
  if (message.role === 'user') message.content[at.index] = { ...message.content[at.index]!, cache_control: EPHEMERAL };
  else message.content[at.index] = { ...message.content[at.index]!, cache_control: EPHEMERAL };
}

function lastAt(messages: AnthropicMessage[]): BlockAt | undefined {
  const turn = messages.length - 1;
  return turn < 0 ? undefined : { turn, index: messages[turn]!.content.length - 1 };
}

/** A message's blocks (a memo may share them: a breakpoint marks a copy). */
type Blocks = ReturnType<typeof convert>;

/**
 * The Messages body of a neutral request (spread into `messages.create({ model, max_tokens,
 * ...body })`), with the messages converted through `memo`.
 */
export function anthropicFormat(memo: MessageMemo): (request: ModelRequest, cache: CacheHints) => AnthropicRequest {
  const blocksOf = memo(convert);
  const quote = memo(quotedTurn);
  return (request, cache) => anthropicBody(request, cache, blocksOf, quote);
}

function anthropicBody(
  request: ModelRequest,
  cache: CacheHints,
  blocksOf: (message: ProviderMessage) => Blocks,
  quote: (message: ToolMessage) => ProviderMessage,
): AnthropicRequest {
  const ordered = providerOrder(request.messages, quote);
  const start = cache.prefixEnd + 1;
  const system: AnthropicTextBlock[] = [];
  for (let i = 0; i < start && i < ordered.length; i++) {
    const text = ordered[i]!.content;
    if (VISIBLE.test(text)) system.push({ type: 'text', text });
  }
  const messages: AnthropicMessage[] = [];
  // The previous request's last block: only when this request extends it (no rebuild).
  const previousLast = cache.rebuilt ? -1 : cache.previousEnd - 1;
  let previousAt: BlockAt | undefined;
  for (let i = start; i < ordered.length; i++) {
    const converted = blocksOf(ordered[i]!);
    if (converted.blocks.length > 0) {
      const last = messages[messages.length - 1];
      if (converted.role === 'user') {
        const content = last?.role === 'user' ? last.content : [];
        if (content !== last?.content) messages.push({ role: 'user', content });
        for (const block of converted.blocks) content.push(block);
      } else {
        const content = last?.role === 'assistant' ? last.content : [];
        if (content !== last?.content) messages.push({ role: 'assistant', content });
        for (const block of converted.blocks) content.push(block);
      }
    }
    if (i === previousLast) previousAt = lastAt(messages);
  }
  const tools = request.tools.map(anthropicTool);
  const stable = system.length > 0 ? system[system.length - 1] : tools[tools.length - 1];
  if (stable !== undefined) stable.cache_control = EPHEMERAL;
  const finalAt = lastAt(messages);
  if (previousAt !== undefined && (previousAt.turn !== finalAt?.turn || previousAt.index !== finalAt.index)) {
    mark(messages, previousAt);
  }
  if (finalAt !== undefined) mark(messages, finalAt);

  const body: AnthropicRequest = system.length > 0 ? { system, messages } : { messages };
  if (tools.length > 0) {
    body.tools = tools;
    body.tool_choice =
      request.toolChoice === 'auto' ? { type: 'auto' } : { type: 'tool', name: request.toolChoice.name };
  }
  return body;
}

/** toAnthropic's body of a neutral request, each message converted every time (pure). */
export const toAnthropic = anthropicFormat(convertEachTime);
