/**
 * Use case: agents. Create, edit (applied from the next run), read and erase an agent with its
 * memories and, on request, its sessions.
 */
import { CtxflowError, FINISH_TOOL } from '@ctxflow/contracts';
import { DEFAULT_CACHE_TTL_MS, DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT_MS, FINISH_DECLARATION } from '../agent-defaults.ts';
import { type ContextInput, mergeBlocks, toBlocks } from '../context-blocks.ts';
import type { AgentRecord, ToolDeclaration } from '../model.ts';
import { checkToolParameters } from '../tool-schema.ts';
import { type EngineContext, ownAgent, untilSettled } from './context.ts';
import { deleteSession } from './sessions.ts';

export interface AgentInput {
  context?: ContextInput;
  model?: string;
  tools?: ToolDeclaration[];
  stepContext?: Partial<AgentRecord['stepContext']>;
  memory?: { autoInject: boolean };
  cacheTtlMs?: number;
}

export async function createAgent(ctx: EngineContext, tenant: string, input: AgentInput): Promise<AgentRecord> {
  const tools = declareTools(input.tools ?? []);
  const agent: AgentRecord = {
    agentId: ctx.ids.newId('agt'),
    tenant,
    context: toBlocks(input.context),
    tools,
    stepContext: {
      maxBytes: input.stepContext?.maxBytes ?? DEFAULT_MAX_BYTES,
      timeoutMs: input.stepContext?.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      ...(input.stepContext?.url ? { url: input.stepContext.url } : {}),
    },
    memory: { autoInject: input.memory?.autoInject ?? false },
    cacheTtlMs: input.cacheTtlMs ?? DEFAULT_CACHE_TTL_MS,
    createdAt: new Date(ctx.clock.now()).toISOString(),
    version: 1,
    ...(input.model ? { model: input.model } : {}),
  };
  await ctx.store.putAgent(agent);
  return agent;
}

/** N3, N6: the edit merges blocks by id and applies from the next run. */
export async function updateAgent(
  ctx: EngineContext,
  tenant: string,
  agentId: string,
  input: { context?: ContextInput; model?: string },
): Promise<AgentRecord> {
  return untilSettled(async () => {
    const agent = await getAgent(ctx, tenant, agentId);
    const next: AgentRecord = { ...agent, version: agent.version + 1 };
    if (input.context !== undefined) next.context = mergeBlocks(agent.context, toBlocks(input.context));
    if (input.model !== undefined) next.model = input.model;
    return (await ctx.store.replaceAgent(next, agent.version)) ? next : 'conflict';
  }, 'the agent changed while it was updated; send the update again');
}

export async function getAgent(ctx: EngineContext, tenant: string, agentId: string): Promise<AgentRecord> {
  return ownAgent(ctx, tenant, agentId);
}

/**
 * Erases an agent, its memories and (with `cascade`) its sessions. Refused with
 * `state_agent_in_use` while sessions of it exist and `cascade` is false. An unknown
 * agent or another tenant's is left alone and answers the same as a deleted one
 * (nothing tells them apart): a repeat succeeds.
 */
export async function deleteAgent(
  ctx: EngineContext,
  tenant: string,
  agentId: string,
  options: { cascade?: boolean } = {},
): Promise<void> {
  const agent = await ctx.store.getAgent(agentId);
  if (!agent || agent.tenant !== tenant) return;
  const sessions = await ctx.store.sessionsOfAgent(tenant, agentId);
  if (sessions.length > 0 && options.cascade !== true) {
    throw new CtxflowError(
      'state_agent_in_use',
      `the agent has ${sessions.length} session(s); delete them, or the agent with ?cascade=true`,
    );
  }
  for (const sessionId of sessions) await deleteSession(ctx, tenant, sessionId);
  // The memories first: a retry after a failure still finds the agent, so it erases them.
  await ctx.memory.forget(agentId);
  await ctx.store.deleteAgent(agentId);
}

export async function remember(ctx: EngineContext, tenant: string, agentId: string, content: string): Promise<void> {
  await getAgent(ctx, tenant, agentId);
  await ctx.memory.remember(agentId, content);
}

function declareTools(tools: ToolDeclaration[]): ToolDeclaration[] {
  const seen = new Set<string>();
  for (const [i, tool] of tools.entries()) {
    if (seen.has(tool.name)) {
      throw new CtxflowError(
        'validation_error',
        `tools.${i}.name: the name of an earlier tool; a name is declared once`,
      );
    }
    seen.add(tool.name);
    if (tool.parameters !== undefined) checkToolParameters(i, tool.parameters);
  }
  // `__finish__` is always declared, whatever `tools` says.
  return seen.has(FINISH_TOOL) ? tools : [...tools, FINISH_DECLARATION];
}
