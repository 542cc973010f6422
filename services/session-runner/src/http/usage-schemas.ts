/**
 * The provider-usage route's body and answers (usage-routes.ts), and the provider cache summary
 * the session snapshot and the inspection carry.
 *
 * The body's `usage` is the object the official SDK returned, as it is: its fields beside the
 * ones read here (output tokens, audio, reasoning, server tools, ...) are accepted and dropped.
 * The type checks at the end hold the schemas to the SDKs' own types (`openai`,
 * `@anthropic-ai/sdk`, types only): every usage object the SDK can return is accepted.
 */
import type { Usage as AnthropicSdkUsage } from '@anthropic-ai/sdk/resources/messages';
import type { CompletionUsage } from 'openai/resources/completions';
import type { ResponseUsage } from 'openai/resources/responses/responses';
import { z } from 'zod';
import type { StepUsage, UsageReport } from '../domain/provider-usage.ts';

function named<S extends z.ZodType>(schema: S, id: string, description?: string): S {
  return schema.meta({ id, title: id, ...(description ? { description } : {}) });
}

const tokens = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).meta({ format: 'int64' });

/** OpenAI Chat Completions `usage` (CompletionUsage): `prompt_tokens` counts the cached ones too. */
export const openAIChatUsage = named(
  z.object({
    prompt_tokens: tokens,
    prompt_tokens_details: z
      .object({ cached_tokens: tokens.optional(), cache_write_tokens: tokens.optional() })
      .optional(),
  }),
  'OpenAIChatUsage',
  "A chat completion's `usage` as the SDK returned it (other fields accepted)",
);

/** OpenAI Responses `usage` (ResponseUsage): `input_tokens` counts the cached ones too. */
export const openAIResponsesUsage = named(
  z.object({
    input_tokens: tokens,
    input_tokens_details: z.object({ cached_tokens: tokens, cache_write_tokens: tokens.optional() }),
  }),
  'OpenAIResponsesUsage',
  "A response's `usage` as the SDK returned it (other fields accepted)",
);

/** Anthropic Messages `usage` (Usage): the request's input is the sum of the three counts. */
export const anthropicUsage = named(
  z.object({
    input_tokens: tokens,
    cache_read_input_tokens: tokens.nullish(),
    cache_creation_input_tokens: tokens.nullish(),
  }),
  'AnthropicUsage',
  "A message's `usage` as the SDK returned it (other fields accepted)",
);

/** Request bodies are documented in their input form, under the id with `Input` (fastify-type-provider-zod). */
const ref = (id: string) => `#/components/schemas/${id}Input`;

export const usageBody = z
  .discriminatedUnion('format', [
    named(z.strictObject({ format: z.literal('openai-chat'), usage: openAIChatUsage }), 'OpenAIChatUsageReport'),
    named(
      z.strictObject({ format: z.literal('openai-responses'), usage: openAIResponsesUsage }),
      'OpenAIResponsesUsageReport',
    ),
    named(z.strictObject({ format: z.literal('anthropic'), usage: anthropicUsage }), 'AnthropicUsageReport'),
  ])
  .meta({
    id: 'UsageReport',
    title: 'UsageReport',
    description: "The provider's `usage` of the step's model request, with the format the step was sent in",
    discriminator: {
      propertyName: 'format',
      mapping: {
        'openai-chat': ref('OpenAIChatUsageReport'),
        'openai-responses': ref('OpenAIResponsesUsageReport'),
        anthropic: ref('AnthropicUsageReport'),
      },
    },
  });

export const stepUsage = named(
  z.object({
    stepId: z.string(),
    ordinal: tokens,
    format: z.enum(['openai-chat', 'openai-responses', 'anthropic']),
    inputTokens: tokens.describe('Every input token of the request'),
    cachedTokens: tokens.describe('Input tokens the provider read from its prompt cache'),
    cacheWriteTokens: tokens.describe('Input tokens the provider wrote to its prompt cache'),
    predictedTokens: tokens
      .nullable()
      .describe(
        "Tokens the step's unchanged prefix predicted cached: what the provider held after the step before (0 for a rebuilt prefix); null without that step's report",
      ),
    shortfall: z.boolean().describe('The provider cached less than predicted: the prefix broke on the way'),
    at: z.string(),
  }),
  'StepUsage',
);

export const usageRecorded = named(
  z.object({
    recorded: z.boolean().describe('false: the step had a report already, which stays (answered here)'),
    usage: stepUsage,
  }),
  'UsageRecorded',
);

export const providerCache = named(
  z.object({
    reportedSteps: tokens,
    inputTokens: tokens,
    cachedTokens: tokens,
    hitRatio: z.number().min(0).max(1).nullable().describe('cachedTokens / inputTokens; null before any report'),
    shortfalls: tokens.describe('Steps whose provider cached less than their unchanged prefix predicted'),
  }),
  'ProviderCache',
  "The session's provider prompt cache as the providers reported it",
);

// Every usage object the SDKs return is accepted, and what is accepted is what the domain reads.
type Accepts<S extends z.ZodType, T extends z.input<S>> = T;
type Reads<T extends UsageReport> = T;
export type UsageSchemasMatch = [
  Accepts<typeof openAIChatUsage, CompletionUsage>,
  Accepts<typeof openAIResponsesUsage, ResponseUsage>,
  Accepts<typeof anthropicUsage, AnthropicSdkUsage>,
  Reads<z.output<typeof usageBody>>,
  Accepts<typeof stepUsage, StepUsage>,
];
