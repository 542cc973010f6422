/**
 * Use case: context intake. The app's items (`POST /context`, deduplicated by request key, a
 * replayed key answered from what this runner saw) and a tool's or hook's items (first-wins per call site).
 */
import { CtxflowError, validateItems } from '@ctxflow/contracts';
import { fingerprint, rawItems } from '../fingerprint.ts';
import { checkOwner, type EngineContext, loadSession } from './context.ts';

/**
 * R12-R14: the app's `POST /context`. A key this runner saw replayed, sent again with
 * the same raw items, is answered as a replay after the tenant check and one store read
 * of the key's fingerprint, without validating or fingerprinting the items again; any
 * other request (or a store that does not confirm) takes the full path.
 */
export async function addContext(
  ctx: EngineContext,
  tenant: string,
  input: { sessionId: string; items: unknown; key?: string },
): Promise<{ recorded: number }> {
  const known = input.key === undefined ? undefined : ctx.cache.replayedKey(input.sessionId, input.key);
  if (known !== undefined && input.key !== undefined && known.raw === rawItems(input.items)) {
    // These items validated before, so the full path would reach the tenant check too.
    const ownerRead = checkOwner(ctx, tenant, input.sessionId);
    if (ownerRead !== undefined) await ownerRead;
    if ((await ctx.store.keyFingerprint(input.sessionId, input.key)) === known.fingerprint) {
      return { recorded: 0 };
    }
  }
  const items = validateItems(input.items, 'app');
  const ownerRead = checkOwner(ctx, tenant, input.sessionId);
  if (ownerRead !== undefined) await ownerRead;
  const at = new Date(ctx.clock.now()).toISOString();
  const dedupe =
    input.key === undefined ? undefined : { type: 'key' as const, key: input.key, fingerprint: fingerprint(items) };
  const result = await ctx.store.enqueue(
    input.sessionId,
    items.map((item) => ({ item, at })),
    dedupe,
  );
  if (result.outcome === 'replayed' && dedupe !== undefined) {
    const raw = rawItems(input.items);
    if (raw !== undefined) ctx.cache.keyReplayed(input.sessionId, dedupe.key, { raw, fingerprint: dedupe.fingerprint });
  }
  switch (result.outcome) {
    case 'recorded':
      return { recorded: result.items.length };
    case 'replayed':
      return { recorded: 0 };
    case 'conflict':
      throw new CtxflowError(
        'state_context_key_conflict',
        'key: used before with other items; send new items under a new key',
      );
    default:
      throw new CtxflowError('state_session_not_found', 'session not found');
  }
}

/** R7, R8, R10, R15: a tool's or hook's `ctx.addContext`, first-wins per call site. */
export async function addCallContext(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  input: { callId: string; origin: 'tool' | 'hook'; site?: string; items: unknown },
): Promise<{ recorded: number }> {
  const items = validateItems(input.items, input.origin);
  const state = await loadSession(ctx, tenant, sessionId);
  const call = state.calls.find((c) => c.callId === input.callId);
  const at = new Date(ctx.clock.now()).toISOString();
  const site = `${input.origin}:${input.site ?? (input.origin === 'tool' ? (call?.name ?? 'tool') : 'hook')}`;
  const tied =
    input.origin === 'tool' ? { callId: input.callId, callStepIndex: call?.stepIndex ?? state.meta.steps } : {};
  const result = await ctx.store.enqueue(
    sessionId,
    items.map((item) => ({ item, at, ...tied })),
    { type: 'site', callId: input.callId, site },
  );
  if (result.outcome === 'not_found') throw new CtxflowError('state_session_not_found', 'session not found');
  return { recorded: result.outcome === 'recorded' ? result.items.length : 0 };
}
