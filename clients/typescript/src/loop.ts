import type { CtxflowClient } from './client.ts';
import { FINISH_TOOL, parseArguments } from './messages.ts';
import type { ProviderAnswers, ProviderFormat, ProviderRequests } from './provider-types.ts';
import type {
  MessageInput,
  ModelRequest,
  NeutralStepAnswer,
  ProviderStepAnswer,
  RequestToolCall,
  StepMode,
  UsageReport,
} from './types.ts';

export type { ProviderAnswers } from './provider-types.ts';

/** What the model answered: its text and the calls it made (`arguments`: the JSON text it produced). */
export interface ModelTurn {
  content: string;
  toolCalls?: RequestToolCall[];
}

/** A tool the loop runs: takes the parsed arguments, returns the result text. */
export type ToolHandler = (args: Record<string, unknown>, call: RequestToolCall) => Promise<string> | string;

/** The model's turn in a provider's answer. */
export function turnOf<F extends ProviderFormat>(format: F, answer: ProviderAnswers[F]): ModelTurn;
export function turnOf(format: ProviderFormat, answer: ProviderAnswers[ProviderFormat]): ModelTurn {
  const calls: RequestToolCall[] = [];
  let content = '';
  if (format === 'openai-chat' && 'choices' in answer) {
    const message = answer.choices[0]?.message;
    content = message?.content ?? '';
    for (const c of message?.tool_calls ?? []) {
      if (c.type === 'function') calls.push({ callId: c.id, name: c.function.name, arguments: c.function.arguments });
    }
  } else if (format === 'openai-responses' && 'output' in answer) {
    for (const item of answer.output) {
      if (item.type === 'function_call') {
        calls.push({ callId: item.call_id, name: item.name, arguments: item.arguments || '{}' });
      } else if (item.type === 'message') {
        for (const part of item.content) if (part.type === 'output_text') content += part.text;
      }
    }
  } else if ('content' in answer) {
    for (const block of answer.content) {
      if (block.type === 'text') content += block.text;
      if (block.type === 'tool_use') {
        calls.push({ callId: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) });
      }
    }
  }
  return calls.length ? { content, toolCalls: calls } : { content };
}

interface LoopBase {
  client: CtxflowClient;
  sessionId: string;
  /** The tools the loop executes, by name. A call to any other tool is left to the gate and to ctxflow. */
  tools: Record<string, ToolHandler>;
  /** Recorded before the first step. */
  userMessage?: string;
  /** Model calls at most; the last one is a forced completion (default 20). */
  maxSteps?: number;
}

/** The neutral request, with any model client: `callModel` maps it and answers the turn. */
export interface NeutralLoopOptions extends LoopBase {
  format?: 'neutral';
  callModel: (request: ModelRequest, step: NeutralStepAnswer) => Promise<ModelTurn>;
}

/**
 * A provider format: `callModel` spreads the request into the official SDK's call as it is, e.g.
 * `(request) => openai.chat.completions.create({ model, ...request })`; the loop reads the answer.
 */
export interface ProviderLoopOptions<F extends ProviderFormat> extends LoopBase {
  format: F;
  callModel: (request: ProviderRequests[F], step: ProviderStepAnswer<F>) => Promise<ProviderAnswers[F]>;
}

export type RunLoopOptions = NeutralLoopOptions | ProviderLoopOptions<ProviderFormat>;

export interface LoopResult {
  /** Model calls made. */
  steps: number;
  /** The `result` of the `__finish__` call, or the last answer's text when the model stopped calling tools. */
  result: string;
  finished: boolean;
  stepIds: string[];
}

/** The `usage` of a provider's answer as a usage report (none when the answer has none). */
export function usageOf<F extends ProviderFormat>(format: F, answer: ProviderAnswers[F]): UsageReport | undefined;
export function usageOf(format: ProviderFormat, answer: ProviderAnswers[ProviderFormat]): UsageReport | undefined {
  if (format === 'openai-chat' && 'choices' in answer)
    return answer.usage ? { format, usage: answer.usage } : undefined;
  if (format === 'openai-responses' && 'output' in answer) {
    return answer.usage ? { format, usage: answer.usage } : undefined;
  }
  if (format === 'anthropic' && 'content' in answer && 'usage' in answer) return { format, usage: answer.usage };
  return undefined;
}

/** A step in a provider format, the SDK call, its usage reported, the turn in its answer. */
async function providerTurn<F extends ProviderFormat>(
  options: ProviderLoopOptions<F>,
  mode: StepMode,
  stepIds: string[],
): Promise<ModelTurn> {
  const step = await options.client.step(options.sessionId, { mode, format: options.format });
  stepIds.push(step.stepId);
  const answer = await options.callModel(step.request, step);
  const usage = usageOf(options.format, answer);
  if (usage) await options.client.usage.report(options.sessionId, step.stepId, usage);
  return turnOf(options.format, answer);
}

function inProviderFormat(options: RunLoopOptions): options is ProviderLoopOptions<ProviderFormat> {
  return options.format !== undefined && options.format !== 'neutral';
}

/** One step in the loop's format, the model call, the turn it made. */
async function modelTurn(options: RunLoopOptions, mode: StepMode, stepIds: string[]): Promise<ModelTurn> {
  if (inProviderFormat(options)) return providerTurn(options, mode, stepIds);
  const step = await options.client.step(options.sessionId, { mode });
  stepIds.push(step.stepId);
  return options.callModel(step.request, step);
}

/**
 * An agent loop on ctxflow's neutral request: a step (the context pass) before every model call,
 * the tool gate before every call the model makes, then the assistant turn and the results of the
 * calls it ran recorded in one request. Calls the gate refuses and `__finish__` get their results from
 * ctxflow itself at the next step. Ends at `__finish__`, at an answer without calls, or after `maxSteps`.
 */
export function runLoop(options: NeutralLoopOptions): Promise<LoopResult>;
export function runLoop<F extends ProviderFormat>(options: ProviderLoopOptions<F>): Promise<LoopResult>;
export async function runLoop(options: RunLoopOptions): Promise<LoopResult> {
  const { client, sessionId } = options;
  const maxSteps = options.maxSteps ?? 20;
  if (options.userMessage !== undefined) {
    await client.messages.create(sessionId, { role: 'user', content: options.userMessage });
  }
  const stepIds: string[] = [];
  for (let n = 1; n <= maxSteps; n++) {
    const mode: StepMode = n === maxSteps ? 'forced_completion' : 'first';
    const turn = await modelTurn(options, mode, stepIds);
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
      if (call.name === FINISH_TOOL) {
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
