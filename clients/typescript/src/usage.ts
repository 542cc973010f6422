import type { UsageReport } from './types.ts';

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The usage report of a provider's raw answer body (what the API sent, as an SDK or a framework
 * keeps it: the AI SDK's `response.body`, the Agents SDK's `providerData`), its format read from
 * the body's shape: a chat completion (`choices`), a response (`object: "response"`), an Anthropic
 * message (`type: "message"`). `usage` is passed on as it is; undefined for any other body.
 */
export function usageFromBody(body: unknown): UsageReport | undefined {
  if (!isObject(body) || !isObject(body.usage)) return undefined;
  const usage = body.usage as never;
  if (Array.isArray(body.choices)) return { format: 'openai-chat', usage };
  if (body.object === 'response') return { format: 'openai-responses', usage };
  if (body.type === 'message') return { format: 'anthropic', usage };
  return undefined;
}
