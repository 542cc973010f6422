/**
 * Use case: queries. What a user may see of a session (messages, snapshot), the operator's view
 * (inspect) and the tenant's sessions.
 */
import { foldActiveTools } from '../active-tools.ts';
import { toolsOf } from '../agent-defaults.ts';
import { foldCursor } from '../fold-cursor.ts';
import type { MessageEntry } from '../model.ts';
import { summarize } from '../provider-usage.ts';
import { agentOf, type EngineContext, loadSession } from './context.ts';

/** R4: what a user may see: messages only, never a context row. */
export async function listMessages(ctx: EngineContext, tenant: string, sessionId: string) {
  const { log } = await loadSession(ctx, tenant, sessionId);
  return log
    .filter((e): e is MessageEntry => e.type === 'message')
    .map((e) => ({
      seq: e.seq,
      role: e.role,
      content: e.content,
      at: e.at,
      ...(e.callId ? { callId: e.callId } : {}),
      ...(e.name ? { name: e.name } : {}),
      ...(e.outcome ? { outcome: e.outcome } : {}),
      ...(e.toolCalls ? { toolCalls: e.toolCalls } : {}),
    }));
}

/** R4: a snapshot a UI may show: no context row in it. */
export async function snapshot(ctx: EngineContext, tenant: string, sessionId: string) {
  const state = await loadSession(ctx, tenant, sessionId);
  const agent = await agentOf(ctx, state.meta);
  const cursor = foldCursor(state.log);
  return {
    sessionId,
    agentId: state.meta.agentId ?? null,
    createdAt: state.meta.createdAt,
    branchOf: state.meta.branchOf ?? null,
    messages: await listMessages(ctx, tenant, sessionId),
    steps: state.meta.steps,
    queued: state.queue.length,
    cursor: cursor ?? null,
    activeTools: foldActiveTools(toolsOf(agent), state.log),
    providerCache: summarize(await ctx.usage.list(sessionId)),
  };
}

/** The operator's view (inspector): everything, rows included. */
export async function inspect(ctx: EngineContext, tenant: string, sessionId: string) {
  const state = await loadSession(ctx, tenant, sessionId);
  const agent = await agentOf(ctx, state.meta);
  const steps = await ctx.store.listSteps(sessionId);
  const usage = await ctx.usage.list(sessionId);
  return {
    meta: state.meta,
    log: state.log.map((e) => (e.type === 'row' ? { seq: e.seq, type: 'row', stepId: e.stepId, row: e.row } : e)),
    queue: state.queue,
    // The gate's calls (a `called` record only says an assistant message made the call).
    calls: state.calls.filter((c) => c.status !== 'called'),
    steps,
    cursor: foldCursor(state.log) ?? null,
    activeTools: foldActiveTools(toolsOf(agent), state.log),
    recent: ctx.events.recent(sessionId),
    usage,
    providerCache: summarize(usage),
  };
}

/** The tenant's sessions, newest first. */
export async function listSessions(ctx: EngineContext, tenant: string, limit = 100) {
  return ctx.store.listSessions(tenant, limit);
}
