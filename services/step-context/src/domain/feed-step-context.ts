import {
  byteLength,
  type Cursor,
  MAX_ITEM_BYTES,
  type TicketUpdate,
  type TicketUpdateRef,
  ticketKey,
} from '@ctxflow/contracts';
import type { SubscriptionStore } from '@ctxflow/subscriptions';
import type { FeedEntry, FeedPosition, FeedStreams } from '../ports/feed-streams.ts';
import { renderNotice } from './render-notice.ts';

/** The request of the session-runner's stepContext port (its StepContextRequest). */
export interface FeedRequest {
  sessionId: string;
  agentId?: string;
  /** The cursor of the last batch that reached the session's log; undefined before the first. */
  cursor: Cursor | undefined;
  /** The batch limit: UTF-8 bytes of `JSON.stringify({ items, cursor })`. */
  maxBytes: number;
  signal: AbortSignal;
  /**
   * Receives the W3C traceparents stored with the entries the returned batch
   * covers (in cursor order; entries without one are left out), before
   * `fetch` resolves. Not called when there are none. The runner links its
   * context pass to them.
   */
  traced?(traceparents: readonly string[]): void;
}

/**
 * One notice as the runner receives it; `source` is what the runner would force anyway.
 * `ticketUpdates`: every update the notice covers (a coalesced notice several), in order; the
 * runner stores them on the row. Counted in the batch's bytes like the rest of the item.
 */
export interface FeedItem {
  kind: 'notice';
  source: 'hook';
  content: string;
  ticketUpdates: TicketUpdateRef[];
}

export interface FeedBatch {
  items: FeedItem[];
  /** The position after the last entry the items cover: `{ v: 2, p: { <source>: <seq>, ... } }`. */
  cursor: Cursor;
}

/** Most entries read from the store for one fetch. */
export const MAX_ENTRIES_PER_FETCH = 1000;

/**
 * The session-runner's stepContext source backed by the ticket feed.
 *
 * `fetch` answers "what is new since cursor C within maxBytes": the entries of
 * the streams the session follows after C (feed-streams.ts), coalesced per
 * ticket (one notice per ticket, in order of each ticket's first entry), as
 * many entries as fit whole, and the cursor after the last entry covered.
 * Nothing is left out: what did not fit comes in the next fetch, from that
 * cursor. An entry too large for the batch on its own is shortened with a
 * marker, never held back (it would block the stream).
 *
 * The cursor is a position per source, `{ v: 2, p: { github: 41, jira: 7 } }`:
 * the last seq read of each source the session follows (sources it stopped
 * following drop out). A cursor it does not recognize (another hook's, or
 * none) reads every stream from where its subscription started; an older one
 * (a rewind) reads again what came after it; a branch keeps its source's
 * subscriptions and start positions, so its cursor reads the same.
 */
export class FeedStepContext {
  readonly #feedStreams: FeedStreams;
  readonly #subscriptions: SubscriptionStore;

  constructor(deps: { feedStreams: FeedStreams; subscriptions: SubscriptionStore }) {
    this.#feedStreams = deps.feedStreams;
    this.#subscriptions = deps.subscriptions;
  }

  async fetch(request: FeedRequest): Promise<FeedBatch | undefined> {
    const after = parseCursor(request.cursor);
    // A step of the session is a write as far as retention goes: its subscriptions are refreshed with the read.
    const [follows] = await Promise.all([
      this.#subscriptions.follows(request.sessionId),
      this.#subscriptions.touch(request.sessionId),
    ]);
    if (follows.length === 0) return undefined;
    const entries = await this.#feedStreams.readSince(follows, after, {
      maxEntries: MAX_ENTRIES_PER_FETCH,
      maxBytes: 4 * request.maxBytes,
    });
    request.signal.throwIfAborted();
    if (entries.length === 0) return undefined;
    const followed = new Set(follows.map((f) => f.subscription.source));
    const kept = Object.fromEntries(Object.entries(after).filter(([source]) => followed.has(source)));
    const { batch, covered } = fitCovered(entries, request.maxBytes, kept);
    if (request.traced) {
      const traceparents = entries.slice(0, covered).flatMap((e) => (e.traceparent ? [e.traceparent] : []));
      if (traceparents.length > 0) request.traced(traceparents);
    }
    return batch;
  }

  /**
   * Erases the session's feed data (the session-runner's SessionFeedData): its
   * subscriptions, with their start positions; no stream names it (a stream is
   * shared, and written only while followed). Idempotent; a retry erases what is left.
   */
  async eraseSession(sessionId: string, tenant: string): Promise<void> {
    await this.#subscriptions.eraseSession(tenant, sessionId);
  }

  /**
   * A branch (R32) starts from its source's feed position and keeps following
   * its tickets: it gets the source's subscriptions with the same start
   * positions, so the source's cursor (which the branch's log keeps) reads the
   * same entries for it. `tenant` owns both sessions.
   */
  async copySession(fromSessionId: string, toSessionId: string, tenant: string): Promise<void> {
    await this.#subscriptions.copySession(tenant, fromSessionId, toSessionId);
  }
}

/** The cursor's version tag: a position per source. */
const CURSOR_VERSION = 2;

/** The position a runner cursor stands for; none (every stream from its start) when it is not ours. */
export function parseCursor(cursor: Cursor | undefined): FeedPosition {
  if (typeof cursor !== 'object' || cursor === null || Array.isArray(cursor)) return {};
  const { v, p } = cursor as { v?: unknown; p?: unknown };
  if (v !== CURSOR_VERSION || typeof p !== 'object' || p === null || Array.isArray(p)) return {};
  const position: Record<string, number> = {};
  for (const [source, seq] of Object.entries(p)) {
    if (typeof seq === 'number' && Number.isSafeInteger(seq) && seq >= 0) position[source] = seq;
  }
  return position;
}

/** The cursor of a position (sources sorted: the same position, the same cursor). */
export function cursorOf(position: FeedPosition): Cursor {
  const p: Record<string, number> = {};
  for (const source of Object.keys(position).sort()) p[source] = position[source]!;
  return { v: CURSOR_VERSION, p };
}

function notice(content: string, updates: readonly TicketUpdate[]): FeedItem {
  const ticketUpdates = updates.map((u) => ({ source: u.source, eventId: u.eventId }));
  return { kind: 'notice', source: 'hook', content, ticketUpdates };
}

/** Bytes of `JSON.stringify({ items, cursor })` given the items' own JSON sizes. */
function batchBytes(itemBytes: Iterable<number>, cursor: Cursor): number {
  let total = '{"items":[],"cursor":}'.length + byteLength(cursor);
  let count = 0;
  for (const bytes of itemBytes) {
    total += bytes;
    count++;
  }
  return total + Math.max(0, count - 1);
}

/**
 * The longest prefix of `entries` whose coalesced notices fit `maxBytes` (and
 * each notice the runner's per-item limit), or the first entry alone,
 * shortened; its cursor is `after` moved past the entries covered. Throws when
 * `maxBytes` cannot hold even a shortened notice.
 */
export function fitEntries(entries: readonly FeedEntry[], maxBytes: number, after: FeedPosition = {}): FeedBatch {
  return fitCovered(entries, maxBytes, after).batch;
}

function fitCovered(
  entries: readonly FeedEntry[],
  maxBytes: number,
  after: FeedPosition,
): { batch: FeedBatch; covered: number } {
  const groups = new Map<string, { updates: TicketUpdate[]; content: string; bytes: number }>();
  const position: Record<string, number> = { ...after };
  const cursors: Cursor[] = [];
  let covered = 0;
  for (const entry of entries) {
    position[entry.source] = Math.max(position[entry.source] ?? 0, entry.seq);
    cursors.push(cursorOf(position));
  }
  for (const entry of entries) {
    const key = ticketKey(entry.update);
    const previous = groups.get(key);
    const updates = [...(previous?.updates ?? []), entry.update];
    const content = renderNotice(updates);
    const bytes = byteLength(notice(content, updates));
    const sizes = [...groups.values()].map((g) => g.bytes);
    if (previous) sizes[[...groups.keys()].indexOf(key)] = bytes;
    else sizes.push(bytes);
    if (bytes > MAX_ITEM_BYTES || batchBytes(sizes, cursors[covered]!) > maxBytes) break;
    groups.set(key, { updates, content, bytes });
    covered++;
  }
  if (covered === 0) return { batch: shortened(entries[0]!, cursors[0]!, maxBytes), covered: 1 };
  const items = [...groups.values()].map((g) => notice(g.content, g.updates));
  const batch = { items, cursor: cursors[covered - 1]! };
  if (byteLength(batch) > maxBytes) throw new Error('step-context batch measured over its limit'); // a bug, never data
  return { batch, covered };
}

const CUT_MARKER = '\n[shortened by ctxflow: the notice was cut to fit the batch limit]';

/** One update too large for the batch on its own: its summary cut, else the whole notice cut. */
function shortened(entry: FeedEntry, cursor: Cursor, maxBytes: number): FeedBatch {
  const updates = [entry.update];
  const fits = (content: string) => {
    const item = notice(content, updates);
    return byteLength(item) <= MAX_ITEM_BYTES && byteLength({ items: [item], cursor }) <= maxBytes;
  };
  const summaryLength = Array.from(entry.update.summary).length;
  const bySummary = (limit: number) => renderNotice([entry.update], { summaryLimit: limit });
  if (fits(bySummary(0))) {
    let low = 0;
    let high = summaryLength;
    while (low < high) {
      const mid = Math.ceil((low + high) / 2);
      if (fits(bySummary(mid))) low = mid;
      else high = mid - 1;
    }
    return { items: [notice(bySummary(low), updates)], cursor };
  }
  // Even without its summary the notice is too large (a long title or link): cut the text itself.
  const points = Array.from(bySummary(0));
  const byText = (length: number) => points.slice(0, length).join('') + CUT_MARKER;
  if (!fits(byText(0))) throw new Error(`a maxBytes of ${maxBytes} cannot hold any step-context notice`);
  let low = 0;
  let high = points.length;
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (fits(byText(mid))) low = mid;
    else high = mid - 1;
  }
  return { items: [notice(byText(low), updates)], cursor };
}
