import type { Written } from '../ports/session-store.ts';
import type { LogEntry, QueuedItem, SessionState } from './model.ts';
import type { LogView } from './render-request.ts';

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
  /** Estimated bytes of `state.log` and `state.queue`, summed once per entry. */
  logBytes: number;
  queueBytes: number;
  bytes: number;
  /** The view of `state.log` or of a log it extends, when the holder had one. */
  view: LogView | undefined;
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

  /**
   * The log view held with the session: of its held log, or of a log the held log extends
   * (a message appended since). logView() extends it.
   */
  view(sessionId: string): LogView | undefined {
    return this.#held.get(sessionId)?.view;
  }

  /**
   * Holds a state that was current at `state.version` (read, created or committed), with
   * the view of its log (or of a log it extends) when the holder has one.
   */
  hold(sessionId: string, state: SessionState, view?: LogView): void {
    if (this.#limits.sessions <= 0) return;
    const previous = this.#held.get(sessionId);
    this.drop(sessionId);
    const logBytes = extended(previous?.state.log, state.log, previous?.logBytes, entryBytes);
    const queueBytes = extended(previous?.state.queue, state.queue, previous?.queueBytes, queuedBytes);
    const bytes = STATE_OVERHEAD + logBytes + queueBytes;
    if (bytes > this.#limits.bytes) return;
    this.#held.set(sessionId, {
      state: Object.freeze(state),
      logBytes,
      queueBytes,
      bytes,
      view,
    });
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
    this.hold(sessionId, { ...change(held.state), version: written.version }, held.view);
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

function queuedBytes(queued: QueuedItem): number {
  return itemBytes(queued.item);
}

/**
 * The bytes of `list`, counting only its new elements when it extends `known` (the
 * list held before, whose bytes were `knownBytes`): a step appends to the log, an
 * enqueue to the queue. Any other list is measured whole.
 */
function extended<T>(
  known: readonly T[] | undefined,
  list: readonly T[],
  knownBytes: number | undefined,
  size: (element: T) => number,
): number {
  let from = 0;
  let bytes = 0;
  if (known && knownBytes !== undefined && list.length >= known.length) {
    if (known.length === 0 || list[known.length - 1] === known.at(-1)) {
      from = known.length;
      bytes = knownBytes;
    }
  }
  for (let i = from; i < list.length; i++) bytes += size(list[i]!);
  return bytes;
}
