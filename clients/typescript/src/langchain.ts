import {
  AIMessage,
  type BaseMessage,
  HumanMessage,
  type MessageContent,
  SystemMessage,
  ToolMessage,
} from '@langchain/core/messages';
import { type StructuredToolInterface, tool } from '@langchain/core/tools';
import { toJsonSchema } from '@langchain/core/utils/json_schema';
import { createMiddleware } from 'langchain';
import type { CtxflowClient } from './client.ts';
import {
  allowedTools,
  type ConversationMessage,
  conversation,
  FINISH_TOOL,
  parseArguments,
  refusalText,
} from './messages.ts';
import type { NeutralStepAnswer, ToolDeclaration } from './types.ts';

export interface CtxflowLangChainOptions {
  client: CtxflowClient;
  sessionId: string;
  /**
   * Model calls in one run (one `invoke`/`stream`) at most; the last one is a forced completion: only
   * `__finish__` is callable (default 10). Use this, not `modelCallLimitMiddleware` or LangGraph's
   * step limit, which end the run with a made-up assistant turn that ctxflow never sees.
   */
  maxModelCalls?: number;
  /**
   * `false`: do not send the active set as OpenAI's `allowed_tools` tool choice, which a ChatOpenAI
   * model gets by default (Chat Completions and Responses alike). Other models are offered every tool
   * and told of a switch-off by its row; the gate refuses a call to a switched-off tool either way.
   */
  allowedTools?: false;
  /** Called with every step answer (rows committed, cache hints). */
  onStep?: (step: NeutralStepAnswer) => void;
  /**
   * Asks a person about a call of a tool declared with `needsApproval` (the gate answered
   * `approval_required`); its answer goes to ctxflow (`approvals.answer`), which then decides: run
   * it, or refuse it (`approval_denied`, whose result ctxflow records). Without it such a call gets
   * the waiting refusal text and the next step is refused (`state_calls_pending`) until the call's
   * approval is answered elsewhere.
   */
  approve?: (call: { callId: string; name: string; args: Record<string, unknown> }) => Promise<boolean>;
}

/** ctxflow's completion tool, as ctxflow declares it; the run ends when the model calls it. */
const finishTool = tool(async () => 'Finished.', {
  name: FINISH_TOOL,
  description: 'Call when the task is done.',
  schema: {
    type: 'object',
    properties: { result: { type: 'string', description: 'The final answer, or a summary of what was done.' } },
    additionalProperties: false,
  },
  returnDirect: true,
});

/** ctxflow's conversation (without the system prefix) as LangChain messages. */
export function toLangChainMessages(messages: readonly ConversationMessage[]): BaseMessage[] {
  return messages.map((m) => {
    if (m.role === 'system') return new SystemMessage(m.content);
    if (m.role === 'user') return new HumanMessage(m.content);
    if (m.role === 'tool')
      // Without `name`: Chat Completions' tool messages have no such field.
      return new ToolMessage({ content: m.content, tool_call_id: m.callId });
    return new AIMessage({
      content: m.content,
      tool_calls: m.toolCalls.map((c) => ({
        type: 'tool_call' as const,
        id: c.callId,
        name: c.name,
        args: parseArguments(c.arguments),
      })),
    });
  });
}

/** The text of a message's content: a string, or its text blocks joined. */
function textOf(content: MessageContent): string {
  if (typeof content === 'string') return content;
  return content.map((part) => (part.type === 'text' && typeof part.text === 'string' ? part.text : '')).join('');
}

/** LangChain tools as ctxflow declares them (`client.agents.create({ tools })`); `__finish__` is ctxflow's. */
export function toolDeclarations(tools: readonly StructuredToolInterface[]): ToolDeclaration[] {
  return tools
    .filter((t) => t.name !== FINISH_TOOL)
    .map((t) => {
      const parameters = parametersOf(t.schema);
      return {
        name: t.name,
        ...(t.description ? { description: t.description } : {}),
        ...(parameters ? { parameters } : {}),
      };
    });
}

/** A tool's schema (zod or JSON Schema) as JSON Schema, without its `$schema` dialect. */
function parametersOf(schema: StructuredToolInterface['schema']): Record<string, unknown> | undefined {
  const json: object = toJsonSchema(schema);
  if (!('type' in json) || json.type !== 'object') return undefined;
  return Object.fromEntries(Object.entries(json).filter(([key]) => key !== '$schema'));
}

/**
 * Which OpenAI API a ChatOpenAI calls (`_useResponsesApi`: its `useResponsesApi` option, or a model
 * that only the Responses API serves); undefined for any other model.
 */
function openAIApi(model: unknown): 'chat' | 'responses' | undefined {
  if (typeof model !== 'object' || model === null || !('_llmType' in model) || typeof model._llmType !== 'function') {
    return undefined;
  }
  if (model._llmType() !== 'openai') return undefined;
  if ('_useResponsesApi' in model && typeof model._useResponsesApi === 'function') {
    return model._useResponsesApi({}) === true ? 'responses' : 'chat';
  }
  return 'useResponsesApi' in model && model.useResponsesApi === true ? 'responses' : 'chat';
}

/**
 * LangChain v1 (`createAgent`) integration, as one middleware. `wrapModelCall` runs ctxflow's step
 * before every model call and hands the model ctxflow's request instead of the agent's messages: the
 * system prefix as the system message, then the log as stored, context rows where they were
 * committed. The graph's own `state.messages` is never rewritten (it stays LangChain's transcript),
 * so a history passed in again, with or without a checkpointer, is never recorded twice. After the
 * model, its turn (text and calls) is recorded; `wrapToolCall` asks the gate before each call, runs
 * it and records its result (a call that needs an approval is first put to `approve`); a refused call gets ctxflow's refusal text as its LangChain result and
 * is not recorded (ctxflow records that result itself). The tool list is the agent's, with
 * `__finish__` added, on every call; the active set goes to OpenAI as `allowed_tools`. One middleware
 * (and so one agent) per session: it counts the model calls of the session's current run.
 */
export function ctxflowMiddleware(options: CtxflowLangChainOptions) {
  const { client, sessionId } = options;
  const maxModelCalls = options.maxModelCalls ?? 10;
  /** Model calls in the current run. */
  let calls = 0;

  return createMiddleware({
    name: 'ctxflow',
    tools: [finishTool],
    beforeAgent: () => {
      calls = 0;
    },
    wrapModelCall: async (request, handler) => {
      calls += 1;
      const forced = calls >= maxModelCalls;
      const step = await client.step(sessionId, {
        format: 'neutral',
        ...(forced ? { mode: 'forced_completion' } : {}),
      });
      options.onStep?.(step);
      const { system, messages } = conversation(step.request);
      const offered = request.tools.flatMap((t) => ('name' in t && typeof t.name === 'string' ? [t.name] : []));
      const allowed = allowedTools(step.request, offered);
      let toolChoice = request.toolChoice;
      const api = openAIApi(request.model);
      if (api !== undefined && options.allowedTools !== false) {
        toolChoice = allowed.names.length === 0 ? 'none' : openAIAllowedTools(api, allowed.names, allowed.required);
      } else if (forced) {
        toolChoice = { type: 'function', function: { name: FINISH_TOOL } };
      }
      const response = await handler({
        ...request,
        systemMessage: new SystemMessage(system),
        messages: toLangChainMessages(messages),
        ...(toolChoice === undefined ? {} : { toolChoice }),
        modelSettings: { ...request.modelSettings, promptCacheKey: step.cache.key },
      });
      const toolCalls = (response.tool_calls ?? []).map((c) => ({
        callId: c.id ?? '',
        name: c.name,
        arguments: JSON.stringify(c.args ?? {}),
      }));
      await client.messages.create(sessionId, {
        role: 'assistant',
        content: textOf(response.content),
        ...(toolCalls.length ? { toolCalls } : {}),
      });
      return response;
    },
    wrapToolCall: async (request, handler) => {
      const { name } = request.toolCall;
      const callId = request.toolCall.id ?? '';
      // `__finish__` is answered by ctxflow itself (`Finished.`), as the tool answers it here.
      if (name === FINISH_TOOL) return handler(request);
      let decision = await client.toolCalls.gate(sessionId, { callId, name });
      if (!decision.execute && decision.reason === 'approval_required' && options.approve) {
        const approved = await options.approve({ callId, name, args: request.toolCall.args });
        decision = await client.approvals.answer(sessionId, callId, approved);
      }
      if (!decision.execute) {
        return new ToolMessage({
          content: refusalText(name, decision.reason ?? 'tool_unavailable'),
          tool_call_id: callId,
          name,
          status: 'error',
        });
      }
      const result = await handler(request);
      // A tool that answers with a Command records its own result.
      if (ToolMessage.isInstance(result)) {
        await client.messages.create(sessionId, { role: 'tool', callId, content: textOf(result.content) });
      }
      return result;
    },
  });
}

/**
 * OpenAI's `allowed_tools` tool choice in the shape of the API the model calls: ChatOpenAI passes a
 * tool choice object through as it is (Chat Completions: `allowed_tools: { mode, tools }` of
 * `{ type: 'function', function: { name } }`; Responses: `mode` and `tools` of `{ type: 'function',
 * name }`), but the agent's `ModelRequest.toolChoice` type names only the standard choices: the one
 * widening is here.
 */
function openAIAllowedTools(api: 'chat' | 'responses', names: string[], required: boolean) {
  const mode = required ? 'required' : 'auto';
  const choice =
    api === 'chat'
      ? {
          type: 'allowed_tools',
          allowed_tools: { mode, tools: names.map((name) => ({ type: 'function', function: { name } })) },
        }
      : { type: 'allowed_tools', mode, tools: names.map((name) => ({ type: 'function', name })) };
  return choice as unknown as { type: 'function'; function: { name: string } };
}
