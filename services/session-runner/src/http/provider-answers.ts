import { z } from 'zod';
import type { AnthropicRequest, OpenAIChatRequest, OpenAIResponsesRequest } from '../domain/provider-formats/index.ts';

/**
 * The `request` of a step answer in a provider format, as the server sends it: that API's
 * request body without `model` (and `max_tokens`). Each message or item is one object whose
 * fields depend on its `role` or `type` (what generated clients read best); the converters in
 * domain/provider-formats/ build them, and the type checks at the end keep the two in step.
 */

const named = <S extends z.ZodType>(schema: S, id: string): S => schema.meta({ id, title: id });
const jsonSchemaObject = z.record(z.string(), z.unknown());

const openAIChatToolRef = named(
  z.object({ type: z.literal('function'), function: z.object({ name: z.string() }) }),
  'OpenAIChatToolRef',
);

export const openAIChatRequest = named(
  z.object({
    messages: z.array(
      named(
        z.object({
          role: z.enum(['system', 'user', 'assistant', 'tool']),
          content: z.string().nullable(),
          tool_calls: z
            .array(
              named(
                z.object({
                  id: z.string(),
                  type: z.literal('function'),
                  function: z.object({ name: z.string(), arguments: z.string() }),
                }),
                'OpenAIChatToolCall',
              ),
            )
            .optional(),
          tool_call_id: z.string().optional(),
        }),
        'OpenAIChatMessage',
      ),
    ),
    tools: z
      .array(
        named(
          z.object({
            type: z.literal('function'),
            function: z.object({
              name: z.string(),
              description: z.string().optional(),
              parameters: jsonSchemaObject.optional(),
              strict: z.boolean().optional(),
            }),
          }),
          'OpenAIChatTool',
        ),
      )
      .optional(),
    tool_choice: z
      .xor([
        z.literal('none'),
        named(
          z.object({
            type: z.enum(['allowed_tools', 'function']),
            allowed_tools: z
              .object({ mode: z.literal('auto'), tools: z.array(openAIChatToolRef) })
              .optional()
              .describe('With type allowed_tools: the active tools'),
            function: z.object({ name: z.string() }).optional().describe('With type function: the forced tool'),
          }),
          'OpenAIChatToolChoice',
        ),
      ])
      .optional(),
    prompt_cache_key: z.string(),
  }),
  'OpenAIChatRequest',
);

const openAIResponsesToolRef = named(
  z.object({ type: z.literal('function'), name: z.string() }),
  'OpenAIResponsesToolRef',
);

export const openAIResponsesRequest = named(
  z.object({
    input: z.array(
      named(
        z.object({
          type: z.enum(['message', 'function_call', 'function_call_output']),
          role: z.enum(['system', 'user', 'assistant']).optional(),
          content: z.string().optional(),
          call_id: z.string().optional(),
          name: z.string().optional(),
          arguments: z.string().optional(),
          output: z.string().optional(),
        }),
        'OpenAIResponsesInputItem',
      ),
    ),
    tools: z
      .array(
        named(
          z.object({
            type: z.literal('function'),
            name: z.string(),
            description: z.string().optional(),
            parameters: jsonSchemaObject.nullable(),
            strict: z.boolean(),
          }),
          'OpenAIResponsesTool',
        ),
      )
      .optional(),
    tool_choice: z
      .xor([
        z.literal('none'),
        named(
          z.object({
            type: z.enum(['allowed_tools', 'function']),
            mode: z.literal('auto').optional(),
            tools: z.array(openAIResponsesToolRef).optional(),
            name: z.string().optional(),
          }),
          'OpenAIResponsesToolChoice',
        ),
      ])
      .optional(),
    prompt_cache_key: z.string(),
  }),
  'OpenAIResponsesRequest',
);

const cacheControl = named(z.object({ type: z.literal('ephemeral') }), 'AnthropicCacheControl');

const anthropicBlock = named(
  z.object({
    type: z.enum(['text', 'tool_use', 'tool_result']),
    text: z.string().optional(),
    id: z.string().optional(),
    name: z.string().optional(),
    input: z.record(z.string(), z.unknown()).optional(),
    tool_use_id: z.string().optional(),
    content: z.string().optional(),
    cache_control: cacheControl.optional(),
  }),
  'AnthropicContentBlock',
);

export const anthropicRequest = named(
  z.object({
    system: z.array(anthropicBlock).optional(),
    messages: z.array(
      named(z.object({ role: z.enum(['user', 'assistant']), content: z.array(anthropicBlock) }), 'AnthropicMessage'),
    ),
    tools: z
      .array(
        named(
          z.object({
            name: z.string(),
            description: z.string().optional(),
            input_schema: jsonSchemaObject,
            strict: z.boolean().optional(),
            cache_control: cacheControl.optional(),
          }),
          'AnthropicTool',
        ),
      )
      .optional(),
    tool_choice: named(
      z.object({ type: z.enum(['auto', 'tool']), name: z.string().optional() }),
      'AnthropicToolChoice',
    ).optional(),
  }),
  'AnthropicRequest',
);

// What the converters build is what these schemas declare.
type Accepts<S extends z.ZodType, T extends z.output<S>> = T;
export type ProviderAnswersMatch = [
  Accepts<typeof openAIChatRequest, OpenAIChatRequest>,
  Accepts<typeof openAIResponsesRequest, OpenAIResponsesRequest>,
  Accepts<typeof anthropicRequest, AnthropicRequest>,
];
