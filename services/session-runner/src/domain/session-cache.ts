import type { Written } from '../ports/session-store.ts';
import type { LogEntry, SessionState } from './model.ts';

/** What a session holds besides its log's text, per entry and per state (an estimate). */
const ENTRY_OVERHEAD = 256;
const STATE_OVERHEAD = 4_096;

export interface SessionCacheLimits {
  /** Sessions held at most; 0 holds nothing. */
  sessions: number;
  /** Estimated bytes held at most (text of the logs and queues, plus a per-entry overhead). */
  bytes: number;
}

interface Held {
  state: SessionState;
  /** Estimated bytes of `state.log`, summed once per entry. */
  logBytes: number;
  bytes: number;
}

/**
 * The session states a runner holds between steps. A step of a held session runs
 * on what is held and commits in ONE write that names the held version: if any
 * other write came between, the store refuses it as a conflict and the step runs
 * again on a fresh read. So a held state is never trusted, only checked, and the
 * common step (the session's previous write was this runner's) reads nothing.
 *
 * Held states are replaced, never changed in place (the engine builds each new state
 * from new arrays and frozen rows). Bounded by sessions and by estimated bytes: the
 * least recently used session leaves first, and a session bigger than the whole
 * budget is not held.
 */
export class SessionCache {
  readonly #held = new Map<string, Held>();
  readonly #limits: SessionCacheLimits;
  #bytes = 0;

  constructor(limits: SessionCacheLimits) {
    this.#limits = limits;
  }

  /** Estimated bytes held now. */
  get bytes(): number {
    return this.#bytes;
  }

  get(sessionId: string): SessionState | undefined {
    const held = this.#held.get(sessionId);
    if (held) {
      this.#held.delete(sessionId);
      this.#held.set(sessionId, held);
    }
    return held?.state;
  }

  /** Holds a state that was current at `state.version` (read, created or committed). */
  hold(sessionId: string, state: SessionState): void {
    if (this.#limits.sessions <= 0) return;
    const previous = this.#held.get(sessionId);
    this.drop(sessionId);
    const logBytes = previous ? extendedLogBytes(previous, state.log) : logBytesOf(state.log, 0);
    const bytes = STATE_OVERHEAD + logBytes + state.queue.reduce((n, q) => n + itemBytes(q.item), 0);
    if (bytes > this.#limits.bytes) return;
    this.#held.set(sessionId, { state: Object.freeze(state), logBytes, bytes });
    this.#bytes += bytes;
    for (const [oldest, held] of this.#held) {
      if (this.#held.size <= this.#limits.sessions && this.#bytes <= this.#limits.bytes) break;
      this.#held.delete(oldest);
      this.#bytes -= held.bytes;
    }
  }

  /**
   * This runner wrote the session: the held state follows the write when it was the
   * state the write replaced, and is dropped otherwise (another write came between).
   */
  follow(sessionId: string, written: Written, change: (held: SessionState) => Omit<SessionState, 'version'>): void {
    const held = this.#held.get(sessionId);
    if (!held) return;
    if (held.state.version !== written.previous) {
      this.drop(sessionId);
      return;
    }
    this.hold(sessionId, { ...change(held.state), version: written.version });
  }

  /** Forgets the session: its next pass reads the store. */
  drop(sessionId: string): void {
    const held = this.#held.get(sessionId);
    if (!held) return;
    this.#held.delete(sessionId);
    this.#bytes -= held.bytes;
  }
}

function itemBytes(item: object): number {
  return ENTRY_OVERHEAD + ('content' in item && typeof item.content === 'string' ? item.content.length : 0);
}

function entryBytes(entry: LogEntry): number {
  return entry.type === 'message' ? ENTRY_OVERHEAD + entry.content.length : itemBytes(entry.row);
}

function logBytesOf(log: readonly LogEntry[], from: number): number {
  let bytes = 0;
  for (let i = from; i < log.length; i++) bytes += entryBytes(log[i]!);
  return bytes;
}

/** The log's bytes, counting only its new entries when it extends the held log (the usual step). */
function extendedLogBytes(previous: Held, log: readonly LogEntry[]): number {
  const known = previous.state.log;
  const extends_ = log.length >= known.length && (known.length === 0 || log[known.length - 1] === known.at(-1));
  return extends_ ? previous.logBytes + logBytesOf(log, known.length) : logBytesOf(log, 0);
}
