import type { CtxflowClient } from './client.ts';
import type { MessageInput, ModelRequest, NeutralStepAnswer, RequestToolCall, StepMode } from './types.ts';

/** What the model answered: its text and the calls it made (`arguments`: the JSON text it produced). */
export interface ModelTurn {
  content: string;
  toolCalls?: RequestToolCall[];
}

/** A tool the loop runs: takes the parsed arguments, returns the result text. */
export type ToolHandler = (args: Record<string, unknown>, call: RequestToolCall) => Promise<string> | string;

export interface RunLoopOptions {
  client: CtxflowClient;
  sessionId: string;
  /** Sends ctxflow's neutral request to the model (any client: openai, @anthropic-ai/sdk, a local model). */
  callModel: (request: ModelRequest, step: NeutralStepAnswer) => Promise<ModelTurn>;
  /** The tools the loop executes, by name. A call to any other tool is left to the gate and to ctxflow. */
  tools: Record<string, ToolHandler>;
  /** Recorded before the first step. */
  userMessage?: string;
  /** Model calls at most; the last one is a forced completion (default 20). */
  maxSteps?: number;
}

export interface LoopResult {
  /** Model calls made. */
  steps: number;
  /** The `result` of the `__finish__` call, or the last answer's text when the model stopped calling tools. */
  result: string;
  finished: boolean;
  stepIds: string[];
}

const FINISH = '__finish__';

function parseArguments(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

/**
 * An agent loop on ctxflow's neutral request: a step (the context pass) before every model call,
 * the tool gate before every call the model makes, then the assistant turn and the results of the
 * calls it ran recorded in one request. Calls the gate refuses and `__finish__` get their results from
 * ctxflow itself at the next step. Ends at `__finish__`, at an answer without calls, or after `maxSteps`.
 */
export async function runLoop(options: RunLoopOptions): Promise<LoopResult> {
  const { client, sessionId } = options;
  const maxSteps = options.maxSteps ?? 20;
  if (options.userMessage !== undefined) {
    await client.messages.create(sessionId, { role: 'user', content: options.userMessage });
  }
  const stepIds: string[] = [];
  for (let n = 1; n <= maxSteps; n++) {
    const mode: StepMode = n === maxSteps ? 'forced_completion' : 'first';
    const step = await client.step(sessionId, { format: 'neutral', mode });
    stepIds.push(step.stepId);
    const turn = await options.callModel(step.request, step);
    const calls = turn.toolCalls ?? [];
    const batch: MessageInput[] = [
      {
        role: 'assistant',
        content: turn.content,
        ...(calls.length
          ? { toolCalls: calls.map((c) => ({ callId: c.callId, name: c.name, arguments: c.arguments })) }
          : {}),
      },
    ];
    let finish: string | undefined;
    for (const call of calls) {
      if (call.name === FINISH) {
        const result = parseArguments(call.arguments).result;
        finish = typeof result === 'string' ? result : turn.content;
        continue;
      }
      const handler = options.tools[call.name];
      const decision = await client.toolCalls.gate(sessionId, { callId: call.callId, name: call.name });
      // A refused call gets ctxflow's result (tool_inactive, tool_unavailable); a client call, its client's answer.
      if (!decision.execute || decision.client) continue;
      const content = handler
        ? await handler(parseArguments(call.arguments), call)
        : `Not executed: this runtime has no handler for ${call.name}.`;
      batch.push({ role: 'tool', callId: call.callId, content });
    }
    await client.messages.createBatch(sessionId, batch);
    if (finish !== undefined) return { steps: n, result: finish, finished: true, stepIds };
    if (calls.length === 0) return { steps: n, result: turn.content, finished: false, stepIds };
  }
  return { steps: maxSteps, result: '', finished: false, stepIds };
}
