import type { Written } from '../ports/session-store.ts';
import type { SessionState } from './model.ts';

/**
 * The session states a runner holds between steps. A step of a held session runs
 * on what is held and commits in ONE write that names the held version: if any
 * other write came between, the store refuses it as a conflict and the step runs
 * again on a fresh read. So a held state is never trusted, only checked, and the
 * common step (the session's previous write was this runner's) reads nothing.
 *
 * Held states are replaced, never changed in place (the engine builds each new state
 * from new arrays and frozen rows). Bounded: the least recently used session leaves first.
 */
export class SessionCache {
  readonly #states = new Map<string, SessionState>();
  readonly #capacity: number;

  /** `capacity` sessions at most; 0 holds nothing. */
  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  get(sessionId: string): SessionState | undefined {
    const state = this.#states.get(sessionId);
    if (state) {
      this.#states.delete(sessionId);
      this.#states.set(sessionId, state);
    }
    return state;
  }

  /** Holds a state that was current at `state.version` (read, created or committed). */
  hold(sessionId: string, state: SessionState): void {
    if (this.#capacity <= 0) return;
    this.#states.delete(sessionId);
    this.#states.set(sessionId, Object.freeze(state));
    if (this.#states.size > this.#capacity) this.#states.delete(this.#states.keys().next().value!);
  }

  /**
   * This runner wrote the session: the held state follows the write when it was the
   * state the write replaced, and is dropped otherwise (another write came between).
   */
  follow(sessionId: string, written: Written, change: (held: SessionState) => Omit<SessionState, 'version'>): void {
    const held = this.#states.get(sessionId);
    if (!held) return;
    if (held.version !== written.previous) {
      this.#states.delete(sessionId);
      return;
    }
    this.hold(sessionId, { ...change(held), version: written.version });
  }

  /** Forgets the session: its next pass reads the store. */
  drop(sessionId: string): void {
    this.#states.delete(sessionId);
  }
}
