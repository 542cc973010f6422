import type { LogView } from '../domain/log-view.ts';
import type { AgentRecord, SessionState } from '../domain/model.ts';

/** Items a request key was replayed with, as received, and the fingerprint they validated to. */
export interface ReplayedKey {
  /** Their JSON text, or its SHA-256 (hex) when long (context-intake.ts rawItems). */
  raw: string;
  fingerprint: string;
}

/**
 * What this runner keeps of the session store in memory between requests
 * (adapters/caching-session-store.ts keeps it, decorating the store the engine writes
 * through, so every write keeps it in step with the store or drops it). What is kept
 * either never changes once written (a session's tenant and agent, an agent's tools, hook
 * and memory settings, a request key's fingerprint) or is never trusted, only checked: a
 * held session state is committed on by its version, and the store refuses a commit when
 * another write came between.
 */
export interface StoreCache {
  /**
   * The tenant of a session: at once when known (a session's tenant never changes),
   * otherwise the promise of a read of its meta (undefined: no such session).
   */
  tenantOf(sessionId: string): string | Promise<string | undefined>;
  /** The agent of a session, when a read or a write of it was seen (a session never changes agent). */
  agentIdOf(sessionId: string): string | undefined;
  /**
   * The agent as last read. Only what never changes of it may be used (tools, stepContext,
   * memory, cacheTtlMs): its context and model come from a read at a run's start (N3, N6).
   */
  knownAgent(agentId: string): AgentRecord | undefined;

  /** The session state held between steps (made the most recently used), if any. */
  held(sessionId: string): SessionState | undefined;
  /** The view of the held state's log (`view.log` is `held(sessionId).log`), when one is held with it. */
  heldView(sessionId: string): LogView | undefined;
  /**
   * Holds a state that is current at `state.version` (read, or committed by this runner),
   * with the view of its log (`view.log === state.log`) when the holder has one. Held states
   * are replaced, never changed in place.
   */
  hold(sessionId: string, state: SessionState, view?: LogView): void;

  /** The items a request key of the session was last replayed with, if this runner saw one. */
  replayedKey(sessionId: string, key: string): ReplayedKey | undefined;
  /** Remembers the items a request key was replayed with (only after the store answered a replay). */
  keyReplayed(sessionId: string, key: string, replayed: ReplayedKey): void;
}
