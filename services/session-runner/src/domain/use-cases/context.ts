/**
 * What the use cases share: the engine's ports with the session lock, and the reads and checks
 * every use case makes.
 */
import { CtxflowError } from '@ctxflow/contracts';
import type { Clock } from '../../ports/clock.ts';
import type { Ids } from '../../ports/ids.ts';
import type { MemoryRecall } from '../../ports/memory-recall.ts';
import type { SessionEvents } from '../../ports/session-events.ts';
import type { SessionFeedData } from '../../ports/session-feed-data.ts';
import type { LoadOptions, SessionStore } from '../../ports/session-store.ts';
import type { StepContextSource } from '../../ports/step-context-source.ts';
import type { StepUsageStore } from '../../ports/step-usage-store.ts';
import type { StoreCache } from '../../ports/store-cache.ts';
import type { RunnerTelemetry } from '../../ports/telemetry.ts';
import type { KeyedMutex } from '../keyed-mutex.ts';
import type { AgentRecord, SessionMeta, SessionState } from '../model.ts';

/** The ports of the engine (create-engine.ts wires them). */
export interface EnginePorts {
  /** The session store; every write of the engine goes through it. */
  store: SessionStore;
  /**
   * What this runner keeps of the store between requests. It follows the writes made through
   * `store` (adapters/caching-session-store.ts is both, one object).
   */
  cache: StoreCache;
  /**
   * Bytes of the system message's JSON of a system prompt (model-request.ts systemMessageBytes),
   * or a memo of it: a session's prefix repeats for many steps.
   */
  systemBytes: (system: string) => number;
  /** The stepContext hook of an agent: its HTTP hook, the ticket feed, or none. */
  stepContextFor(agent: AgentRecord | undefined): StepContextSource | undefined;
  memory: MemoryRecall;
  events: SessionEvents;
  clock: Clock;
  ids: Ids;
  telemetry: RunnerTelemetry;
  /** The session data the ticket feed keeps (erased with the session); none when no feed is wired. */
  feedData?: SessionFeedData;
  /** The provider usage reported for steps (erased with the session). */
  usage: StepUsageStore;
}

/**
 * What every use case runs on: the ports, and the lock that serializes writes to one
 * session in this process (the store's atomic commits guard against other processes).
 */
export interface EngineContext extends Readonly<EnginePorts> {
  readonly locks: KeyedMutex;
}

/** Attempts of a write that is refused when the session (or agent) changed since it was read. */
const CONFLICT_ATTEMPTS = 5;

/**
 * Optimistic concurrency: runs `attempt` (a read, a check and a write conditional on what was
 * read) until it does not answer `conflict`, at most CONFLICT_ATTEMPTS times; then a retryable
 * `state_conflict` saying `what` kept changing.
 */
export async function untilSettled<T>(attempt: () => Promise<T | 'conflict'>, what: string): Promise<T> {
  for (let i = 0; i < CONFLICT_ATTEMPTS; i++) {
    const result = await attempt();
    if (result !== 'conflict') return result;
  }
  throw new CtxflowError('state_conflict', what);
}

/**
 * The session's whole state (with `window`: its log window, log-window.ts), refused as absent
 * when it is another tenant's.
 */
export async function loadSession(
  ctx: EngineContext,
  tenant: string,
  sessionId: string,
  options: LoadOptions = {},
): Promise<SessionState> {
  const state = await ctx.store.load(sessionId, options);
  if (!state || state.meta.tenant !== tenant) {
    throw new CtxflowError('state_session_not_found', 'session not found');
  }
  return state;
}

/** The session's agent, read now; undefined for a session without one. */
export async function agentOf(ctx: EngineContext, meta: SessionMeta): Promise<AgentRecord | undefined> {
  return meta.agentId === undefined ? undefined : ctx.store.getAgent(meta.agentId);
}

/** The tenant's agent; another tenant's or none is refused as absent. */
export async function ownAgent(ctx: EngineContext, tenant: string, agentId: string): Promise<AgentRecord> {
  const agent = await ctx.store.getAgent(agentId);
  if (!agent || agent.tenant !== tenant) throw new CtxflowError('state_agent_not_found', 'agent not found');
  return agent;
}

/** Refuses a session of another tenant (or none: `owner` undefined) as absent. */
function ownedBy(owner: string | undefined, tenant: string): void {
  if (owner !== tenant) throw new CtxflowError('state_session_not_found', 'session not found');
}

/**
 * Refuses a session of another tenant as absent, without loading the log. A session's
 * tenant never changes, so a known one answers at once, without a read or a promise
 * (undefined; a write that follows still finds an absent session absent); an unknown one
 * gives the promise of its read.
 */
export function checkOwner(ctx: EngineContext, tenant: string, sessionId: string): Promise<void> | undefined {
  const owner = ctx.cache.tenantOf(sessionId);
  if (typeof owner !== 'string') return owner.then((read) => ownedBy(read, tenant));
  ownedBy(owner, tenant);
  return undefined;
}
