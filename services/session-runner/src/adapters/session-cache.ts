import { LRUCache } from 'lru-cache';
import type { LogView } from '../domain/log-view.ts';
import { logStartOf, trimToFold } from '../domain/log-window.ts';
import type { CallRecord, LogEntry, QueuedItem, SessionMeta, SessionState } from '../domain/model.ts';
import type { Written } from '../ports/session-store.ts';
import { callIdsKeptOf, DEFAULT_REQUEST_IDS_KEPT, RECORD_TRIM_EVERY, REQUEST_TRIM_EVERY } from './request-retention.ts';

/**
 * The heap a held session takes besides the JSON of its parts: V8 keeps each object,
 * array slot and string with a header, and a held log has its view beside it (one
 * message object and one size per entry). Calibrated with `v8.getHeapStatistics()`
 * on logs of short and long entries (test/adapters/session-cache.test.ts holds thousands
 * of sessions and checks the live heap against the bound).
 */
const ENTRY_OVERHEAD = 256;
const CALL_OVERHEAD = 128;
const STRING_OVERHEAD = 64;
const STATE_OVERHEAD = 2_048;

/** A held session that nothing used for this long gives way to a session not held (SessionCache). */
export const HELD_IDLE_MS = 60_000;
/** How often at most a SessionCache looks for held sessions unused for its `idleMs`. */
const PURGE_EVERY_MS = 1_000;
/** Sessions refused for want of room whose size a SessionCache keeps (it does not measure them again). */
const REFUSED_KEPT = 10_000;

export interface SessionCacheLimits {
  /** Sessions held at most; 0 holds nothing. */
  sessions: number;
  /**
   * Estimated heap bytes held at most: the UTF-8 bytes of the JSON of every part of each
   * state (its log twice for rows, which the log's view renders again), plus a per-entry
   * and a per-state overhead.
   */
  bytes: number;
  /**
   * Call records a held state keeps, with their call sites (CTXFLOW_CALL_IDS_KEPT, the store's
   * retention, request-retention.ts); default DEFAULT_CALL_IDS_KEPT.
   */
  callIdsKept?: number;
  /** Ms a held session may go unused before it gives way to a session not held; default HELD_IDLE_MS. */
  idleMs?: number;
}

interface Held {
  state: SessionState;
  /** Estimated bytes of each part of `state`, measured once per new element or new part. */
  parts: Parts;
  bytes: number;
  /** The view of `state.log` (its `log` is that array), when the holder had one. */
  view: LogView | undefined;
}

/** A session refused for want of room: its log's start and length then, and its estimated bytes. */
interface Refused {
  start: number;
  length: number;
  bytes: number;
}

interface Parts {
  meta: MetaBytes;
  log: number;
  queue: number;
  calls: number;
  sites: number;
  requestIds: number;
}

/**
 * The session states a runner holds between steps. A step of a held session runs
 * on what is held and commits in ONE write that names the held version: if any
 * other write came between, the store refuses it as a conflict and the step runs
 * again on a fresh read. So a held state is never trusted, only checked, and the
 * common step (the session's previous write was this runner's) reads nothing.
 *
 * Held states are replaced, never changed in place (the engine builds each new state
 * from new arrays and frozen rows). An LRU cache bounded by sessions and by estimated
 * bytes, and a session bigger than the whole budget is not held. A session not held is
 * held only when the budget has room for it: it never pushes held sessions out, held
 * sessions that went unused for `idleMs` make way first. When the sessions in use are
 * more than the budget holds, letting each read push out the least recently used would
 * push out, step after step, the session whose step comes next (sessions stepped in
 * turn): nothing held would ever be used, and every state held and pushed out would
 * outlive the young generation and load the old one. Held sessions that grow still
 * push out the least recently used. A session refused is not measured again while the
 * room is less than it took then (a log only grows until a rewind, which drops it).
 */
export class SessionCache {
  readonly #held: LRUCache<string, Held> | undefined;
  readonly #callIdsKept: number;
  readonly #refused = new LRUCache<string, Refused>({ max: REFUSED_KEPT });
  readonly #idleMs: number;
  /** When held sessions unused for `idleMs` were last let go (performance.now()). */
  #purgedAt = Number.NEGATIVE_INFINITY;

  constructor(limits: SessionCacheLimits) {
    this.#callIdsKept = callIdsKeptOf(limits.callIdsKept);
    this.#idleMs = limits.idleMs ?? HELD_IDLE_MS;
    this.#held =
      limits.sessions > 0
        ? new LRUCache<string, Held>({
            max: limits.sessions,
            maxSize: limits.bytes,
            sizeCalculation: (held) => held.bytes,
            ttl: this.#idleMs,
            // Ages read on a clock as coarse as the purge: at lru-cache's default (a new reading
            // each millisecond, each arming a timer) a busy runner armed one every few steps.
            ttlResolution: Math.min(PURGE_EVERY_MS, this.#idleMs),
            updateAgeOnGet: true,
          })
        : undefined;
  }

  /** Estimated bytes held now. */
  get bytes(): number {
    return this.#held?.calculatedSize ?? 0;
  }

  /** The held state (none once unused for `idleMs`); makes the session the most recently used. */
  get(sessionId: string): SessionState | undefined {
    return this.#held?.get(sessionId)?.state;
  }

  /** The view of the held log, when one is held with it. */
  view(sessionId: string): LogView | undefined {
    return this.#held?.peek(sessionId)?.view;
  }

  /**
   * Holds a state that was current at `state.version` (read, created or committed), with
   * the view of its log when the holder has one (a view of another log is not held).
   */
  hold(sessionId: string, state: SessionState, view?: LogView): void {
    if (this.#held === undefined) return;
    // A window stays a window: cut at the fold when a user message moved it (log-window.ts).
    const kept = keepRecentCalls(keepRecentRequests(trimToFold(state)), this.#callIdsKept);
    const previous = this.#held.peek(sessionId);
    // A session not held takes only the room left: first at least what it took when refused.
    if (!previous && !this.#hasRoom(this.#leastBytes(sessionId, kept))) return;
    const parts = measure(previous, kept);
    const bytes =
      STATE_OVERHEAD + parts.meta.total + parts.log + parts.queue + parts.calls + parts.sites + parts.requestIds;
    if (!previous) {
      if (!this.#hasRoom(bytes)) {
        this.#refused.set(sessionId, { start: logStartOf(kept), length: kept.log.length, bytes });
        return;
      }
      this.#refused.delete(sessionId);
    }
    // Over maxSize: not held, and what was held of the session is dropped.
    const ofLog = view?.log === kept.log ? view : undefined;
    this.#held.set(sessionId, { state: Object.freeze(kept), parts, bytes, view: ofLog });
  }

  /**
   * The least a state of a session not held takes: what it took when refused while its log
   * extends the log it had then, else its overheads.
   */
  #leastBytes(sessionId: string, state: SessionState): number {
    const refused = this.#refused.get(sessionId);
    if (refused && refused.start === logStartOf(state) && state.log.length >= refused.length) return refused.bytes;
    return STATE_OVERHEAD + ENTRY_OVERHEAD * state.log.length;
  }

  /** Whether a session of `bytes` fits beside the held ones, once those unused for `idleMs` are let go. */
  #hasRoom(bytes: number): boolean {
    const held = this.#held!;
    const fits = () => held.size < held.max && held.calculatedSize + bytes <= held.maxSize;
    if (fits()) return true;
    // Staleness is a matter of `idleMs`: the held sessions are looked through once a second at most.
    const now = performance.now();
    if (now - this.#purgedAt < Math.min(PURGE_EVERY_MS, this.#idleMs)) return false;
    this.#purgedAt = now;
    held.purgeStale();
    return fits();
  }

  /**
   * This runner wrote the session: the held state follows the write when it was the
   * state the write replaced, and is dropped otherwise (another write came between).
   * `appended`: the entries the write appended to the log (the held view gets them too);
   * `change` leaves the log alone.
   */
  follow(
    sessionId: string,
    written: Written,
    change: (held: SessionState) => Omit<SessionState, 'version'>,
    appended?: readonly LogEntry[],
  ): void {
    const held = this.#held?.peek(sessionId);
    if (!held) return;
    if (held.state.version !== written.previous) {
      this.drop(sessionId);
      return;
    }
    const next = { ...change(held.state), version: written.version };
    if (appended === undefined) {
      this.hold(sessionId, next, held.view);
      return;
    }
    const view = held.view?.append(appended);
    // The view's own log (a held log is replaced, never changed in place).
    const log = (view?.log as LogEntry[] | undefined) ?? held.state.log.concat(appended);
    this.hold(sessionId, { ...next, log }, view);
  }

  /** Forgets the session: its next pass reads the store. */
  drop(sessionId: string): void {
    this.#held?.delete(sessionId);
    this.#refused.delete(sessionId);
  }
}

/**
 * The state with its last DEFAULT_REQUEST_IDS_KEPT request ids once it holds REQUEST_TRIM_EVERY
 * more (a step appends one): the held ids only spare a read for a redelivery, which the commit
 * checks against the store's records anyway (request-retention.ts).
 */
function keepRecentRequests(state: SessionState): SessionState {
  if (state.requestIds.length <= DEFAULT_REQUEST_IDS_KEPT + REQUEST_TRIM_EVERY) return state;
  return { ...state, requestIds: state.requestIds.slice(-DEFAULT_REQUEST_IDS_KEPT) };
}

/**
 * The state with its last `callIdsKept` call records, and only the call sites of those, once it
 * holds RECORD_TRIM_EVERY more (an assistant message or the gate adds one): what the store keeps
 * (request-retention.ts), so a held long session holds no more calls than the store does.
 */
function keepRecentCalls(state: SessionState, callIdsKept: number): SessionState {
  if (state.calls.length <= callIdsKept + RECORD_TRIM_EVERY) return state;
  const gone = new Set(state.calls.slice(0, -callIdsKept).map((c) => c.callId));
  const sites = state.sites.filter((site) => !gone.has(site.slice(0, site.indexOf('|'))));
  return { ...state, calls: state.calls.slice(-callIdsKept), sites };
}

/** A string outside Latin-1: V8 keeps such strings in two bytes a character. */
const TWO_BYTE = /[\u0100-\uffff]/;

/** The heap bytes of the text of a value's JSON: one byte a character, two when any is beyond Latin-1. */
function jsonBytes(value: unknown): number {
  return textBytes(JSON.stringify(value) ?? '');
}

function textBytes(text: string): number {
  return TWO_BYTE.test(text) ? 2 * text.length : text.length;
}

/** A log entry, and for a row the text its view renders again. */
function entryBytes(entry: LogEntry): number {
  return ENTRY_OVERHEAD + jsonBytes(entry) + (entry.type === 'row' ? jsonBytes(entry.row) : 0);
}

function queuedBytes(queued: QueuedItem): number {
  return ENTRY_OVERHEAD + jsonBytes(queued);
}

function callBytes(call: CallRecord): number {
  return CALL_OVERHEAD + jsonBytes(call);
}

function stringBytes(text: string): number {
  return STRING_OVERHEAD + textBytes(text);
}

/** The parts of `state`, reusing what `previous` measured of the parts it shares. */
function measure(previous: Held | undefined, state: SessionState): Parts {
  const known = previous?.state;
  const parts = previous?.parts;
  return {
    meta: known?.meta === state.meta && parts ? parts.meta : metaBytes(known?.meta, parts?.meta, state.meta),
    log: extended(known?.log, state.log, parts?.log, entryBytes),
    queue: extended(known?.queue, state.queue, parts?.queue, queuedBytes),
    calls: known?.calls === state.calls && parts ? parts.calls : state.calls.reduce((n, c) => n + callBytes(c), 0),
    sites: extended(known?.sites, state.sites, parts?.sites, stringBytes),
    requestIds: extended(known?.requestIds, state.requestIds, parts?.requestIds, stringBytes),
  };
}

/** The bytes of the meta's JSON (`total`), and of each of its fields by key (`"key":value`). */
interface MetaBytes {
  total: number;
  fields: Readonly<Record<string, number>>;
}

/**
 * The bytes of `meta`, reusing what was measured of the fields it shares with `known` (whose
 * bytes were `knownBytes`): a step's meta keeps its prefix, thread and run (the same objects)
 * and changes its counters.
 */
function metaBytes(known: SessionMeta | undefined, knownBytes: MetaBytes | undefined, meta: SessionMeta): MetaBytes {
  const fields: Record<string, number> = {};
  // The braces, then a comma between fields.
  let total = 1;
  for (const key in meta) {
    const value = meta[key as keyof SessionMeta];
    if (value === undefined) continue;
    const kept = knownBytes?.fields[key];
    const bytes =
      kept !== undefined && known?.[key as keyof SessionMeta] === value ? kept : textBytes(key) + 3 + jsonBytes(value);
    fields[key] = bytes;
    total += bytes + 1;
  }
  return { total: total === 1 ? 2 : total, fields };
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
