import type { AgentInputItem, CallModelInputFilterArgs, ModelInputData } from '@openai/agents';
import type { CtxflowClient } from './client.ts';
import { conversation, FINISH_TOOL } from './messages.ts';
import type { MessageInput, ModelRequest, NeutralStepAnswer, ToolCallInput } from './types.ts';
import { usageFromBody } from './usage.ts';

/** ctxflow's neutral messages as Agents SDK input items, without the system prefix (it goes to `instructions`). */
export function toAgentInput(request: ModelRequest): AgentInputItem[] {
  return conversation(request).messages.flatMap((m): AgentInputItem[] => {
    switch (m.role) {
      case 'system':
      case 'user':
        return [{ role: m.role, content: m.content }];
      case 'assistant':
        return [
          ...(m.content
            ? [
                {
                  role: 'assistant' as const,
                  status: 'completed' as const,
                  content: [{ type: 'output_text' as const, text: m.content }],
                },
              ]
            : []),
          ...m.toolCalls.map((c) => ({
            type: 'function_call' as const,
            callId: c.callId,
            name: c.name,
            arguments: c.arguments,
            status: 'completed' as const,
          })),
        ];
      default:
        return [
          {
            type: 'function_call_result',
            callId: m.callId,
            name: m.name,
            status: 'completed',
            output: { type: 'text', text: m.content },
          },
        ];
    }
  });
}

function outputText(output: unknown): string {
  if (typeof output === 'string') return output;
  if (typeof output === 'object' && output !== null && 'text' in output && typeof output.text === 'string') {
    return output.text;
  }
  return JSON.stringify(output ?? null);
}

/** Items the SDK produced in one turn (its answer, its calls, their results) as one ctxflow batch. */
export function turnMessages(items: readonly AgentInputItem[]): MessageInput[] {
  let text = '';
  const calls: ToolCallInput[] = [];
  const results: MessageInput[] = [];
  for (const item of items) {
    if ('role' in item && item.role === 'assistant') {
      for (const part of Array.isArray(item.content) ? item.content : []) {
        if (part.type === 'output_text') text += part.text;
      }
    } else if (item.type === 'function_call') {
      calls.push({ callId: item.callId, name: item.name, arguments: item.arguments || '{}' });
    } else if (item.type === 'function_call_result' && item.name !== FINISH_TOOL) {
      results.push({ role: 'tool', callId: item.callId, content: outputText(item.output) });
    }
  }
  if (!text && calls.length === 0) return results;
  return [{ role: 'assistant', content: text, ...(calls.length ? { toolCalls: calls } : {}) }, ...results];
}

export interface CtxflowAgentsOptions {
  client: CtxflowClient;
  sessionId: string;
  /** Called with every step answer (rows committed, cache hints). */
  onStep?: (step: NeutralStepAnswer) => void;
}

/**
 * OpenAI Agents SDK integration. `callModelInputFilter` (a Runner option) first records what the SDK
 * produced since the previous model call (the assistant turn with its tool calls and results, one
 * request), then runs ctxflow's step and sends its request as it is: `instructions` the system
 * prefix, `input` the conversation with context rows where they were committed. `record(result.history)`
 * records the last turn once the run is over; `reportUsage(result.rawResponses)` reports the provider's
 * usage of each model call to its step (the raw answer the model kept as `providerData`).
 */
export function ctxflowAgents(options: CtxflowAgentsOptions) {
  const { client, sessionId } = options;
  /** How many items of the SDK's own history were recorded (or were its starting input). */
  let seen: number | undefined;
  /** The ctxflow step of each model call, in order. */
  const stepIds: string[] = [];
  /** How many of those were reported. */
  let reported = 0;

  async function record(history: readonly AgentInputItem[]): Promise<void> {
    const batch = turnMessages(history.slice(seen ?? history.length));
    seen = history.length;
    if (batch.length) await client.messages.createBatch(sessionId, batch);
  }

  return {
    callModelInputFilter: async ({ modelData }: CallModelInputFilterArgs): Promise<ModelInputData> => {
      await record(modelData.input);
      const step = await client.step(sessionId, { format: 'neutral' });
      stepIds.push(step.stepId);
      options.onStep?.(step);
      return { instructions: step.request.system, input: toAgentInput(step.request) };
    },
    /** Records the turns after the last model call (pass `result.history`). */
    record,
    /**
     * Reports each model call's provider usage to its step: pass each run's `result.rawResponses`
     * (one per model call, in order) once, after the run; they answer the model calls not reported yet.
     */
    async reportUsage(rawResponses: readonly { providerData?: Record<string, unknown> | undefined }[]): Promise<void> {
      const steps = stepIds.slice(reported, reported + rawResponses.length);
      reported += steps.length;
      for (const [i, stepId] of steps.entries()) {
        const usage = usageFromBody(rawResponses[i]!.providerData);
        if (usage) await client.usage.report(sessionId, stepId, usage);
      }
    },
  };
}
