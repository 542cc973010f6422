/**
 * Use case: sessions. Create one, stage its thread context, erase it in every store.
 */
import { type ContextInput, mergeBlocks, toBlocks } from '../context-blocks.ts';
import type { SessionMeta } from '../model.ts';
import { type EngineContext, loadSession, ownAgent } from './context.ts';

export async function createSession(
  ctx: EngineContext,
  tenant: string,
  input: { agentId?: string; context?: ContextInput },
): Promise<SessionMeta> {
  if (input.agentId !== undefined) await ownAgent(ctx, tenant, input.agentId);
  const meta: SessionMeta = {
    sessionId: ctx.ids.newId('ses'),
    tenant,
    createdAt: new Date(ctx.clock.now()).toISOString(),
    thread: { live: toBlocks(input.context) },
    forceRefresh: false,
    steps: 0,
    ...(input.agentId === undefined ? {} : { agentId: input.agentId }),
  };
  await ctx.store.createSession(meta, [], [], []);
  return meta;
}

/** N4, N5, N6: thread context is staged until the next rebuild; forceRefresh folds it now. */
export async function updateSession(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  input: { context?: ContextInput; forceRefresh?: boolean },
) {
  return ctx.locks.run(sessionId, async () => {
    const { meta } = await loadSession(ctx, tenant, sessionId);
    const next = structuredClone(meta);
    if (input.context !== undefined) {
      next.thread.staged = mergeBlocks(meta.thread.staged ?? meta.thread.live, toBlocks(input.context));
    }
    if (input.forceRefresh) next.forceRefresh = true;
    await ctx.store.putMeta(next);
    return { staged: next.thread.staged !== undefined, forceRefresh: next.forceRefresh };
  });
}

/**
 * Erases a session in every store: the feed's data (subscriptions first, so no update
 * is appended to it any more), the steps' provider usage, then the session store's records, then the feed's again
 * (a subscription made while the session was being erased). An unknown session or
 * another tenant's is left alone and answers the same as an erased one (nothing tells
 * them apart): a repeat succeeds. A failure leaves the meta, so a retry erases the rest.
 * Its branches are sessions of their own and stay.
 */
export async function deleteSession(ctx: EngineContext, tenant: string, sessionId: string): Promise<void> {
  await ctx.locks.run(sessionId, async () => {
    const meta = await ctx.store.getMeta(sessionId);
    if (!meta || meta.tenant !== tenant) return;
    await ctx.feedData?.eraseSession(sessionId, tenant);
    await ctx.usage.deleteSession(sessionId); // before the meta goes: a retry after a failure finds the session
    await ctx.store.deleteSession(sessionId);
    ctx.events.forget(sessionId); // the stream's replay holds message text
    await ctx.feedData?.eraseSession(sessionId, tenant);
  });
}
