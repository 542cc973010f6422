import { byteLength, type Cursor, MAX_ITEM_BYTES, type TicketUpdate, ticketKey } from '@ctxflow/contracts';
import type { BatchEntry, BatchStore } from '../ports/batch-store.ts';
import type { SubscriptionStore } from '../ports/subscription-store.ts';
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

/** One notice as the runner receives it; `source` is what the runner would force anyway. */
export interface FeedItem {
  kind: 'notice';
  source: 'hook';
  content: string;
}

export interface FeedBatch {
  items: FeedItem[];
  /** The cursor of the last entry the items cover. */
  cursor: number;
}

/** Most entries read from the store for one fetch. */
export const MAX_ENTRIES_PER_FETCH = 1000;

/**
 * The session-runner's stepContext source backed by the ticket feed.
 *
 * `fetch` answers "what is new since cursor C within maxBytes": the entries
 * after C, coalesced per ticket (one notice per ticket, in order of each
 * ticket's first entry), as many entries as fit whole, and the cursor of the
 * last entry covered. Nothing is left out: what did not fit comes in the next
 * fetch, from that cursor. An entry too large for the batch on its own is
 * shortened with a marker, never held back (it would block the stream).
 *
 * Cursors are the batch store's integers. A cursor it does not recognize (a
 * previous hook's) reads the stream from its start.
 */
export class FeedStepContext {
  readonly #batches: BatchStore;
  readonly #subscriptions: SubscriptionStore;

  constructor(deps: { batches: BatchStore; subscriptions: SubscriptionStore }) {
    this.#batches = deps.batches;
    this.#subscriptions = deps.subscriptions;
  }

  async fetch(request: FeedRequest): Promise<FeedBatch | undefined> {
    const after = parseCursor(request.cursor);
    // A step of the session is a write as far as retention goes: its feed keys are refreshed with the read.
    const [entries] = await Promise.all([
      this.#batches.readSince(request.sessionId, after, {
        maxEntries: MAX_ENTRIES_PER_FETCH,
        maxBytes: 4 * request.maxBytes,
      }),
      this.#batches.touch(request.sessionId),
    ]);
    request.signal.throwIfAborted();
    if (entries.length === 0) return undefined;
    const batch = fitEntries(entries, request.maxBytes);
    if (request.traced) {
      const traceparents = entries.flatMap((e) => (e.cursor <= batch.cursor && e.traceparent ? [e.traceparent] : []));
      if (traceparents.length > 0) request.traced(traceparents);
    }
    return batch;
  }

  /**
   * Erases the session's feed data (the session-runner's SessionFeedData): its
   * subscriptions first (no subscriber index names it any more, and a store that
   * appends only to subscribed sessions refuses an update in flight), then its
   * stream, cursor, marks and dedupe ids. Idempotent; a retry erases what is left.
   */
  async eraseSession(sessionId: string, tenant: string): Promise<void> {
    await this.#subscriptions.eraseSession(tenant, sessionId);
    await this.#batches.erase(sessionId);
  }

  /**
   * A branch (R32) starts from its source's feed position and keeps following
   * its tickets: the subscriptions are copied first, then the stream (which
   * merges anything the branch received in between). `tenant` owns both sessions.
   */
  async copySession(fromSessionId: string, toSessionId: string, tenant: string): Promise<void> {
    for (const subscription of await this.#subscriptions.list(fromSessionId)) {
      await this.#subscriptions.subscribe(tenant, toSessionId, subscription);
    }
    await this.#batches.copy(fromSessionId, toSessionId);
  }
}

/** The stream position a runner cursor stands for; 0 (from the start) when it is not ours. */
export function parseCursor(cursor: Cursor | undefined): number {
  if (typeof cursor === 'number' && Number.isSafeInteger(cursor) && cursor >= 0) return cursor;
  if (typeof cursor === 'string' && /^\d{1,15}$/.test(cursor)) return Number.parseInt(cursor, 10);
  return 0;
}

function notice(content: string): FeedItem {
  return { kind: 'notice', source: 'hook', content };
}

/** Bytes of `JSON.stringify({ items, cursor })` given the items' own JSON sizes. */
function batchBytes(itemBytes: Iterable<number>, cursor: number): number {
  let total = '{"items":[],"cursor":}'.length + String(cursor).length;
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
 * shortened. Throws when `maxBytes` cannot hold even a shortened notice.
 */
export function fitEntries(entries: readonly BatchEntry[], maxBytes: number): FeedBatch {
  const groups = new Map<string, { updates: TicketUpdate[]; content: string; bytes: number }>();
  let covered = 0;
  for (const entry of entries) {
    const key = ticketKey(entry.update);
    const previous = groups.get(key);
    const updates = [...(previous?.updates ?? []), entry.update];
    const content = renderNotice(updates);
    const bytes = byteLength(notice(content));
    const sizes = [...groups.values()].map((g) => g.bytes);
    if (previous) sizes[[...groups.keys()].indexOf(key)] = bytes;
    else sizes.push(bytes);
    if (bytes > MAX_ITEM_BYTES || batchBytes(sizes, entry.cursor) > maxBytes) break;
    groups.set(key, { updates, content, bytes });
    covered++;
  }
  if (covered === 0) return shortened(entries[0]!, maxBytes);
  const batch = { items: [...groups.values()].map((g) => notice(g.content)), cursor: entries[covered - 1]!.cursor };
  if (byteLength(batch) > maxBytes) throw new Error('step-context batch measured over its limit'); // a bug, never data
  return batch;
}

const CUT_MARKER = '\n[shortened by ctxflow: the notice was cut to fit the batch limit]';

/** One update too large for the batch on its own: its summary cut, else the whole notice cut. */
function shortened(entry: BatchEntry, maxBytes: number): FeedBatch {
  const fits = (content: string) => {
    const item = notice(content);
    return byteLength(item) <= MAX_ITEM_BYTES && byteLength({ items: [item], cursor: entry.cursor }) <= maxBytes;
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
    return { items: [notice(bySummary(low))], cursor: entry.cursor };
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
  return { items: [notice(byText(low))], cursor: entry.cursor };
}
