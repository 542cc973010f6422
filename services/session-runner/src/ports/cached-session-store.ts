import type { AgentRecord, SessionState } from '../domain/model.ts';
import type { LogView } from '../domain/render-request.ts';
import type { SessionStore } from './session-store.ts';

/** Items a request key was replayed with, as received, and the fingerprint they validated to. */
export interface ReplayedKey {
  /** Their JSON text, or its SHA-256 (hex) when long (context-intake.ts rawItems). */
  raw: string;
  fingerprint: string;
}

/**
 * The session store with what this runner keeps of it in memory between requests
 * (adapters/caching-session-store.ts decorates any SessionStore with it). What is kept
 * either never changes once written (a session's tenant and agent, an agent's tools, hook
 * and memory settings, a request key's fingerprint) or is never trusted, only checked: a
 * held session state is committed on by its version, and the store refuses a commit when
 * another write came between. Every write through it keeps the held state in step with
 * the store, or drops it.
 */
export interface CachedSessionStore extends SessionStore {
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
  /** The log view held with the session: of its held log, or of a log the held log extends. */
  heldView(sessionId: string): LogView | undefined;
  /**
   * Holds a state that is current at `state.version` (read, or committed by this runner),
   * with the view of its log when the holder has one. Held states are replaced, never
   * changed in place.
   */
  hold(sessionId: string, state: SessionState, view?: LogView): void;

  /** The items a request key of the session was last replayed with, if this runner saw one. */
  replayedKey(sessionId: string, key: string): ReplayedKey | undefined;
  /** Remembers the items a request key was replayed with (only after the store answered a replay). */
  keyReplayed(sessionId: string, key: string, replayed: ReplayedKey): void;
}
