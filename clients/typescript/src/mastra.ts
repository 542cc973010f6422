import type {
  ProcessInputStepArgs,
  ProcessInputStepResult,
  ProcessLLMRequestArgs,
  ProcessOutputResultArgs,
  Processor,
} from '@mastra/core/processors';
import { type FinishedStep, stepMessages } from './ai-sdk.ts';
import type { CtxflowClient } from './client.ts';
import { conversation } from './messages.ts';
import type { ModelRequest, NeutralStepAnswer } from './types.ts';

/** The prompt Mastra forwards to the model (the AI SDK provider prompt it converted its messages to). */
export type MastraPrompt = ProcessLLMRequestArgs['prompt'];

export interface CtxflowMastraOptions {
  client: CtxflowClient;
  sessionId: string;
  /** Called with every step answer (rows committed, cache hints). */
  onStep?: (step: NeutralStepAnswer) => void;
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return {};
  }
}

/** A tool's output as Mastra's step holds it: a provider result part (`{ type: 'text', value }`) or the value. */
function resultValue(output: unknown): unknown {
  if (typeof output === 'object' && output !== null && 'type' in output && 'value' in output) {
    if (output.type === 'text' || output.type === 'json') return output.value;
  }
  return output;
}

/** A finished step as the run's result holds it (tool calls and results as stream chunks). */
type ResultStep = ProcessOutputResultArgs['result']['steps'][number];

function fromChunks(step: ResultStep): FinishedStep {
  return {
    text: step.text,
    toolCalls: step.toolCalls.map((c) => ({
      toolCallId: c.payload.toolCallId,
      toolName: c.payload.toolName,
      input: c.payload.args,
    })),
    toolResults: step.toolResults.map((r) => ({ toolCallId: r.payload.toolCallId, output: r.payload.result })),
  };
}

/**
 * ctxflow's neutral messages as the provider prompt Mastra sends: the system prefix and the context
 * rows of system form as system messages where they were committed, tool calls and their results
 * paired, a result without its call as a user turn (`orphanText`).
 */
export function toMastraPrompt(request: ModelRequest): MastraPrompt {
  const { system, messages } = conversation(request);
  const out: MastraPrompt = system === '' ? [] : [{ role: 'system', content: system }];
  for (const m of messages) {
    switch (m.role) {
      case 'system':
        out.push({ role: 'system', content: m.content });
        break;
      case 'user':
        out.push({ role: 'user', content: [{ type: 'text', text: m.content }] });
        break;
      case 'assistant':
        out.push({
          role: 'assistant',
          content: [
            ...(m.content ? [{ type: 'text' as const, text: m.content }] : []),
            ...m.toolCalls.map((c) => ({
              type: 'tool-call' as const,
              toolCallId: c.callId,
              toolName: c.name,
              input: parsed(c.arguments),
            })),
          ],
        });
        break;
      case 'tool':
        out.push({
          role: 'tool',
          content: [
            { type: 'tool-result', toolCallId: m.callId, toolName: m.name, output: { type: 'text', value: m.content } },
          ],
        });
        break;
    }
  }
  return out;
}

/** A processor with the hooks Mastra's input and output processor lists ask for. */
export type CtxflowProcessor = Processor<'ctxflow'> &
  Required<Pick<Processor<'ctxflow'>, 'processInputStep' | 'processLLMRequest' | 'processOutputResult'>>;

export interface CtxflowMastra {
  /** For the agent's `inputProcessors` and `outputProcessors`. */
  processor: CtxflowProcessor;
  /** The next model call is a forced completion: only `__finish__` is callable. */
  forceCompletion(): void;
}

/**
 * Mastra integration: a processor for an `Agent`'s `inputProcessors` and `outputProcessors` (the
 * same object in both). Before each model call
 * (`processInputStep`) it records the steps Mastra finished since the previous call (the assistant
 * turn with its tool calls and results, one request each), then runs ctxflow's step; the prompt
 * Mastra forwards (`processLLMRequest`) is replaced by ctxflow's request as it is, the system prefix
 * and the context rows where they were committed. Mastra's own message list, memory and tools stay
 * untouched: the tool list sent is the agent's, the active set goes to OpenAI as
 * `providerOptions.openai.allowedTools` with ctxflow's cache key as `promptCacheKey`.
 * `processOutputResult` (as an output processor) records the last step when the run ends. The conversation is ctxflow's:
 * record the user's message with `client.messages.create` before `agent.generate`.
 */
export function ctxflowMastra(options: CtxflowMastraOptions): CtxflowMastra {
  const { client, sessionId } = options;
  /** How many of Mastra's steps of the current run were recorded. */
  let recorded = 0;
  let current: NeutralStepAnswer | undefined;
  let forced = false;

  async function record(steps: readonly FinishedStep[]): Promise<void> {
    for (const step of steps.slice(recorded)) {
      // Mastra leaves the lists out of a step that has none.
      const toolResults = (step.toolResults ?? []).map((r) => ({
        toolCallId: r.toolCallId,
        output: resultValue(r.output),
      }));
      const batch = stepMessages({ text: step.text ?? '', toolCalls: step.toolCalls ?? [], toolResults });
      await client.messages.createBatch(sessionId, batch);
    }
    recorded = steps.length;
  }

  const processor: CtxflowProcessor = {
    id: 'ctxflow',
    name: 'ctxflow',
    processInputStep: async ({ steps, stepNumber, tools }: ProcessInputStepArgs): Promise<ProcessInputStepResult> => {
      if (stepNumber === 0) recorded = 0;
      await record(steps);
      const step = await client.step(sessionId, {
        format: 'neutral',
        ...(forced ? { mode: 'forced_completion' } : {}),
      });
      forced = false;
      current = step;
      options.onStep?.(step);
      const { request } = step;
      const required = request.toolChoice !== 'auto';
      const allowed =
        required && typeof request.toolChoice === 'object' ? [request.toolChoice.name] : request.activeTools;
      // The allowed set names only tools the agent offers (a provider refuses any other name).
      const toolNames = allowed.filter((name) => tools !== undefined && name in tools);
      return {
        ...(toolNames.length ? {} : { toolChoice: 'none' as const }),
        providerOptions: {
          openai: {
            promptCacheKey: step.cache.key,
            ...(toolNames.length ? { allowedTools: { toolNames, mode: required ? 'required' : 'auto' } } : {}),
          },
        },
      };
    },
    processLLMRequest: () => (current === undefined ? undefined : { prompt: toMastraPrompt(current.request) }),
    processOutputResult: async ({ result, messageList }) => {
      await record(result.steps.map(fromChunks));
      return messageList;
    },
  };

  return {
    processor,
    forceCompletion() {
      forced = true;
    },
  };
}
