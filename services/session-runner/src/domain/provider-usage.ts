/**
 * What a provider reports of a model request's input tokens, read the same way for every format,
 * and what the step's unchanged prefix predicted of it.
 *
 * The usage objects, as each SDK returns them (the fields read here):
 *
 *   OpenAI chat:      usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens
 *                     (prompt_tokens counts the cached ones too)
 *   OpenAI responses: usage.input_tokens, usage.input_tokens_details.cached_tokens
 *                     (input_tokens counts the cached ones too)
 *   Anthropic:        usage.input_tokens (after the last cache breakpoint),
 *                     usage.cache_read_input_tokens, usage.cache_creation_input_tokens
 *                     (the request's input is the sum of the three)
 *
 * The prediction: a step that kept its prefix (`cache.rebuilt` false) sends the whole previous
 * request of the session unchanged at its start, so the provider should read from its cache
 * everything it held after that request:
 * - OpenAI caches a prompt from 1,024 tokens on, in steps of 128 tokens: of a previous request of
 *   n tokens it holds 1,024 + 128 * floor((n - 1,024) / 128), nothing below 1,024;
 * - Anthropic holds what the previous request read and wrote up to its last breakpoint (ctxflow
 *   puts one on the last block): its cache_read_input_tokens + cache_creation_input_tokens.
 * A rebuilt prefix predicts 0. Without the previous step's report (or with one of another
 * format) nothing is predicted (`null`) and nothing is flagged.
 */
import type { StepRecord } from './model.ts';

export type UsageFormat = 'openai-chat' | 'openai-responses' | 'anthropic';

/** `usage` of a chat completion (the fields read). */
export interface OpenAIChatUsage {
  prompt_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number | undefined; cache_write_tokens?: number | undefined } | undefined;
}

/** `usage` of a response (the fields read). */
export interface OpenAIResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; cache_write_tokens?: number | undefined };
}

/** `usage` of an Anthropic message (the fields read). */
export interface AnthropicUsage {
  input_tokens: number;
  cache_read_input_tokens?: number | null | undefined;
  cache_creation_input_tokens?: number | null | undefined;
}

export type UsageReport =
  | { format: 'openai-chat'; usage: OpenAIChatUsage }
  | { format: 'openai-responses'; usage: OpenAIResponsesUsage }
  | { format: 'anthropic'; usage: AnthropicUsage };

/** One format's reading: every input token, those read from the cache, those written to it. */
export interface UsageReading {
  inputTokens: number;
  cachedTokens: number;
  cacheWriteTokens: number;
}

/** What ctxflow keeps of a step's usage report. */
export interface StepUsage extends UsageReading {
  stepId: string;
  /** The step's ordinal (its place in the session). */
  ordinal: number;
  format: UsageFormat;
  /** Tokens the step's unchanged prefix predicted cached; null when nothing could be predicted. */
  predictedTokens: number | null;
  /** The provider cached less than predicted. */
  shortfall: boolean;
  /** When it was reported (ISO 8601). */
  at: string;
}

/** The reading of a report; undefined when it contradicts itself (more cached tokens than input). */
export function readUsage(report: UsageReport): UsageReading | undefined {
  let reading: UsageReading;
  switch (report.format) {
    case 'openai-chat': {
      const details = report.usage.prompt_tokens_details;
      reading = {
        inputTokens: report.usage.prompt_tokens,
        cachedTokens: details?.cached_tokens ?? 0,
        cacheWriteTokens: details?.cache_write_tokens ?? 0,
      };
      break;
    }
    case 'openai-responses': {
      const details = report.usage.input_tokens_details;
      reading = {
        inputTokens: report.usage.input_tokens,
        cachedTokens: details.cached_tokens,
        cacheWriteTokens: details.cache_write_tokens ?? 0,
      };
      break;
    }
    case 'anthropic': {
      const read = report.usage.cache_read_input_tokens ?? 0;
      const written = report.usage.cache_creation_input_tokens ?? 0;
      return { inputTokens: report.usage.input_tokens + read + written, cachedTokens: read, cacheWriteTokens: written };
    }
  }
  return reading.cachedTokens + reading.cacheWriteTokens > reading.inputTokens ? undefined : reading;
}

/** OpenAI's prompt caching: from this many tokens on ... */
export const OPENAI_CACHE_MIN_TOKENS = 1024;
/** ... in steps of this many. */
export const OPENAI_CACHE_STEP_TOKENS = 128;

/** Tokens the provider holds in its cache for the session after the request `usage` reports. */
export function heldAfter(usage: Pick<StepUsage, 'format' | 'inputTokens' | 'cachedTokens' | 'cacheWriteTokens'>) {
  if (usage.format === 'anthropic') return usage.cachedTokens + usage.cacheWriteTokens;
  if (usage.inputTokens < OPENAI_CACHE_MIN_TOKENS) return 0;
  const steps = Math.floor((usage.inputTokens - OPENAI_CACHE_MIN_TOKENS) / OPENAI_CACHE_STEP_TOKENS);
  return OPENAI_CACHE_MIN_TOKENS + steps * OPENAI_CACHE_STEP_TOKENS;
}

/**
 * The tokens `step`'s unchanged prefix predicts cached in `format`: 0 for a rebuilt prefix, else
 * what the provider held after the previous step (`previous`, the report of the step just before
 * it); null without that report or with one in another format.
 */
export function predictCached(
  step: Pick<StepRecord, 'ordinal' | 'cache'>,
  format: UsageFormat,
  previous: StepUsage | undefined,
): number | null {
  if (step.cache.rebuilt) return 0;
  if (previous === undefined || previous.format !== format || previous.ordinal !== step.ordinal - 1) return null;
  return heldAfter(previous);
}

/** A session's provider cache in figures: totals over its reported steps and the real hit ratio. */
export interface ProviderCacheSummary {
  /** Steps with a usage report. */
  reportedSteps: number;
  inputTokens: number;
  cachedTokens: number;
  /** cachedTokens / inputTokens; null before any input token was reported. */
  hitRatio: number | null;
  /** Steps whose provider cached less than their unchanged prefix predicted. */
  shortfalls: number;
}

export function summarize(usages: readonly StepUsage[]): ProviderCacheSummary {
  let inputTokens = 0;
  let cachedTokens = 0;
  let shortfalls = 0;
  for (const u of usages) {
    inputTokens += u.inputTokens;
    cachedTokens += u.cachedTokens;
    if (u.shortfall) shortfalls += 1;
  }
  return {
    reportedSteps: usages.length,
    inputTokens,
    cachedTokens,
    hitRatio: inputTokens === 0 ? null : cachedTokens / inputTokens,
    shortfalls,
  };
}
