/**
 * What a provider's prompt cache compares between two requests of a session, per format, as
 * two strings: `stable` must be byte-equal and `conversation` of the earlier request must be a
 * byte prefix of the later one's, for the later request to read everything the earlier one
 * wrote.
 *
 * Why these: a provider reuses its cache for the longest prefix of a request it has seen, in
 * its own order: tools, then system, then the conversation.
 * - `stable`: the tool list (Anthropic: and the top-level `system`), all of it prefix.
 * - `conversation`: OpenAI chat `messages` / responses `input` as their JSON without the closing
 *   bracket; Anthropic, which caches by block, one line per block `[role of its turn, block]`
 *   (a turn may gain blocks at its end, so the JSON of `messages` is not a byte prefix while
 *   the sequence of blocks is).
 * `cache_control` is dropped everywhere, identically: it marks where to write or read the cache,
 * it is not cached content, and its place moves by design (the last block of each request
 * carries one). `tool_choice` is left out: it is the only field the active set changes, by
 * design outside the cached prefix (OpenAI allowed_tools; Anthropic keeps every tool offered).
 * `key` is the OpenAI `prompt_cache_key` (absent for Anthropic): not content, but it routes the
 * request to a cache, so a changed key is a likely miss even over an equal prefix.
 */
import type { AnthropicRequest } from './anthropic.ts';
import type { OpenAIChatRequest } from './openai-chat.ts';
import type { OpenAIResponsesRequest } from './openai-responses.ts';

export interface CachedPrefix {
  key: string | undefined;
  stable: string;
  conversation: string;
}

/** JSON text without `cache_control` properties (`'-'` for undefined). */
export function unmarked(value: unknown): string {
  return JSON.stringify(value, (key, v) => (key === 'cache_control' ? undefined : v)) ?? '-';
}

const open = (items: unknown[]) => JSON.stringify(items).slice(0, -1);

export function chatPrefix(body: OpenAIChatRequest): CachedPrefix {
  return { key: body.prompt_cache_key, stable: unmarked(body.tools), conversation: open(body.messages) };
}

export function responsesPrefix(body: OpenAIResponsesRequest): CachedPrefix {
  return { key: body.prompt_cache_key, stable: unmarked(body.tools), conversation: open(body.input) };
}

export function anthropicPrefix(body: AnthropicRequest): CachedPrefix {
  let conversation = '';
  for (const m of body.messages) for (const b of m.content) conversation += `${unmarked([m.role, b])}\n`;
  return { key: undefined, stable: unmarked([body.tools, body.system]), conversation };
}

/**
 * Bytes of `next.conversation` equal to `previous.conversation` from the start, over the latter's
 * length (1: all kept); 0 when `stable` differs. The `key` is not compared here.
 */
export function prefixShare(previous: CachedPrefix, next: CachedPrefix): number {
  if (previous.stable !== next.stable) return 0;
  const a = Buffer.from(previous.conversation);
  const b = Buffer.from(next.conversation);
  if (a.length === 0) return 1;
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i / a.length;
}
