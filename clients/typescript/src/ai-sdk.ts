import type { ModelMessage, PrepareStepResult, ToolSet } from 'ai';
import type { CtxflowClient } from './client.ts';
import { allowedTools, conversation, FINISH_TOOL, parseArguments } from './messages.ts';
import type { MessageInput, ModelRequest, NeutralStepAnswer } from './types.ts';
import { usageFromBody } from './usage.ts';

/** The fields of a finished AI SDK step (`onStepFinish`'s event, a `StepResult`) the recorder reads. */
export interface FinishedStep {
  readonly text: string;
  readonly toolCalls: ReadonlyArray<{
    readonly toolCallId: string;
    readonly toolName: string;
    readonly input: unknown;
  }>;
  readonly toolResults: ReadonlyArray<{ readonly toolCallId: string; readonly output: unknown }>;
  /** The provider's answer: its raw `body` carries the provider's `usage` (generateText keeps it). */
  readonly response?: { readonly body?: unknown };
}

export interface CtxflowAiSdkOptions<TOOLS extends ToolSet> {
  client: CtxflowClient;
  sessionId: string;
  /** The tool set given to generateText/streamText: the allowed set is limited to its names. */
  tools: TOOLS;
  /** Called with every step answer (rows committed, cache hints). */
  onStep?: (step: NeutralStepAnswer) => void;
}

/**
 * ctxflow's neutral messages as AI SDK messages, without the system prefix (it goes to `instructions`).
 * Context rows of system form stay system messages where they were committed (generateText needs
 * `allowSystemInMessages: true`).
 */
export function toModelMessages(request: ModelRequest): ModelMessage[] {
  return conversation(request).messages.map((m): ModelMessage => {
    switch (m.role) {
      case 'system':
      case 'user':
        return { role: m.role, content: m.content };
      case 'assistant':
        return {
          role: 'assistant',
          content: [
            ...(m.content ? [{ type: 'text' as const, text: m.content }] : []),
            ...m.toolCalls.map((c) => ({
              type: 'tool-call' as const,
              toolCallId: c.callId,
              toolName: c.name,
              input: parseArguments(c.arguments),
            })),
          ],
        };
      default:
        return {
          role: 'tool',
          content: [
            { type: 'tool-result', toolCallId: m.callId, toolName: m.name, output: { type: 'text', value: m.content } },
          ],
        };
    }
  });
}

/** A tool's output as the result text ctxflow records. */
function resultText(output: unknown): string {
  return typeof output === 'string' ? output : JSON.stringify(output ?? null);
}

/** The assistant turn of a finished step with the results of the calls the SDK ran, as one batch. */
export function stepMessages(step: FinishedStep): MessageInput[] {
  const calls = step.toolCalls.map((c) => ({
    callId: c.toolCallId,
    name: c.toolName,
    arguments: JSON.stringify(c.input ?? {}),
  }));
  const batch: MessageInput[] = [
    { role: 'assistant', content: step.text, ...(calls.length ? { toolCalls: calls } : {}) },
  ];
  for (const call of step.toolCalls) {
    // `__finish__` is answered by ctxflow itself.
    if (call.toolName === FINISH_TOOL) continue;
    const result = step.toolResults.find((r) => r.toolCallId === call.toolCallId);
    if (result) batch.push({ role: 'tool', callId: call.toolCallId, content: resultText(result.output) });
  }
  return batch;
}

/**
 * Vercel AI SDK integration: `prepareStep` runs ctxflow's step before every model call and sends its
 * request as it is (instructions, messages with context rows where they were committed); the tool
 * list stays the one given (the prompt cache stays warm), the active set goes to OpenAI as
 * `providerOptions.openai.allowedTools` (not `activeTools`, which removes tools from the request),
 * with ctxflow's cache key as `promptCacheKey`. `onStepFinish` records the step's assistant turn with
 * its tool calls and results in one request, then reports the provider's usage of the step, read
 * from the raw answer body: pass `include: { responseBody: true }` to generateText so step results
 * keep it (without it nothing is reported).
 */
export function ctxflowAiSdk<TOOLS extends ToolSet>(options: CtxflowAiSdkOptions<TOOLS>) {
  const { client, sessionId } = options;
  const names = new Set(Object.keys(options.tools));
  let forced = false;
  /** The ctxflow step of the model call in progress. */
  let current: string | undefined;
  return {
    /** The next model call is a forced completion: only `__finish__` is callable. */
    forceCompletion() {
      forced = true;
    },
    prepareStep: async (): Promise<PrepareStepResult<TOOLS>> => {
      const step = await client.step(sessionId, {
        format: 'neutral',
        ...(forced ? { mode: 'forced_completion' } : {}),
      });
      forced = false;
      current = step.stepId;
      options.onStep?.(step);
      const { request } = step;
      const { names: toolNames, required } = allowedTools(request, names);
      return {
        ...(request.system ? { instructions: request.system } : {}),
        messages: toModelMessages(request),
        ...(toolNames.length ? {} : { toolChoice: 'none' as const }),
        providerOptions: {
          openai: {
            promptCacheKey: step.cache.key,
            ...(toolNames.length ? { allowedTools: { toolNames, mode: required ? 'required' : 'auto' } } : {}),
          },
        },
      };
    },
    onStepFinish: async (step: FinishedStep): Promise<void> => {
      await client.messages.createBatch(sessionId, stepMessages(step));
      const usage = usageFromBody(step.response?.body);
      if (usage && current !== undefined) await client.usage.report(sessionId, current, usage);
    },
    /** A `stopWhen` condition: the last step called `__finish__`. */
    finished: ({ steps }: { steps: ReadonlyArray<Pick<FinishedStep, 'toolCalls'>> }): boolean =>
      steps.at(-1)?.toolCalls.some((c) => c.toolName === FINISH_TOOL) ?? false,
  };
}
