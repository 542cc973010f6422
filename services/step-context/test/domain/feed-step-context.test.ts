import { byteLength, type Cursor, DEFAULT_TENANT, MAX_ITEM_BYTES, type TicketUpdate } from '@ctxflow/contracts';
import { type FeedEntry, FeedStepContext, MemoryFeedStreams } from '@ctxflow/step-context';
import { MemorySubscriptionStore } from '@ctxflow/subscriptions';
import { describe, expect, it } from 'vitest';
import { fitEntries, parseCursor } from '../../src/domain/feed-step-context.ts';
import { renderNotice } from '../../src/domain/render-notice.ts';
import { makeUpdate } from '../helpers.ts';

const signal = new AbortController().signal;

function entries(...updates: ReturnType<typeof makeUpdate>[]): FeedEntry[] {
  return updates.map((update, i) => ({ source: update.source, seq: i + 1, update }));
}

/** The ticket updates a notice names: source and event id of each, in order. */
const refs = (...updates: TicketUpdate[]) => updates.map((u) => ({ source: u.source, eventId: u.eventId }));

/** The feed's cursor: a position per source. */
const at = (p: Record<string, number>) => ({ v: 2, p });

describe('fitEntries', () => {
  it('coalesces updates of one ticket into one notice, tickets in order of first appearance', () => {
    const a1 = makeUpdate({ ticket: 'A', summary: 'a1' });
    const b1 = makeUpdate({ ticket: 'B', summary: 'b1' });
    const a2 = makeUpdate({ ticket: 'A', summary: 'a2' });
    const batch = fitEntries(entries(a1, b1, a2), 32 * 1024);
    expect(batch).toEqual({
      items: [
        { kind: 'notice', source: 'hook', content: renderNotice([a1, a2]), ticketUpdates: refs(a1, a2) },
        { kind: 'notice', source: 'hook', content: renderNotice([b1]), ticketUpdates: refs(b1) },
      ],
      cursor: at({ generic: 3 }),
    });
  });

  it('returns whole entries that fit, with the cursor of the last one covered', () => {
    const list = entries(
      ...Array.from({ length: 10 }, (_, i) => makeUpdate({ ticket: `T${i}`, summary: 'y'.repeat(200) })),
    );
    const one = byteLength(fitEntries(list.slice(0, 1), 1e6));
    const three = byteLength(fitEntries(list.slice(0, 3), 1e6));
    expect(fitEntries(list, three).cursor).toEqual(at({ generic: 3 }));
    expect(fitEntries(list, three - 1).cursor).toEqual(at({ generic: 2 }));
    expect(fitEntries(list, one).cursor).toEqual(at({ generic: 1 }));
    expect(byteLength(fitEntries(list, three - 1))).toBeLessThanOrEqual(three - 1);
  });

  it('never lets a coalesced notice pass the per-item limit of the runner', () => {
    const list = entries(
      ...Array.from({ length: 8 }, () => makeUpdate({ ticket: 'BIG', summary: 'z'.repeat(10_000) })),
    );
    const batch = fitEntries(list, 1024 * 1024);
    expect(batch.cursor).toEqual(at({ generic: 3 }));
    expect(batch.items).toHaveLength(1);
    expect(byteLength(batch.items[0])).toBeLessThanOrEqual(MAX_ITEM_BYTES);
  });

  it('shortens an entry larger than maxBytes on its own instead of blocking the stream', () => {
    const big = makeUpdate({ ticket: 'HUGE', summary: 'w'.repeat(16_000) });
    const next = makeUpdate({ ticket: 'NEXT' });
    const batch = fitEntries(entries(big, next), 2048);
    expect(batch.cursor).toEqual(at({ generic: 1 }));
    expect(batch.items).toHaveLength(1);
    expect(byteLength(batch)).toBeLessThanOrEqual(2048);
    expect(byteLength(batch)).toBeGreaterThan(1900); // as much as fits
    expect(batch.items[0]!.content).toMatch(/"w+…"\n\[shortened by ctxflow: each quoted summary cut to \d+ characters/);
  });

  it('cuts the notice text itself when even an empty summary does not fit', () => {
    const wide = makeUpdate({ ticket: 'W', title: 't'.repeat(1000), summary: 'short' });
    const batch = fitEntries(entries(wide), 600);
    expect(byteLength(batch)).toBeLessThanOrEqual(600);
    expect(batch.items[0]!.content.endsWith('[shortened by ctxflow: the notice was cut to fit the batch limit]')).toBe(
      true,
    );
    expect(() => fitEntries(entries(wide), 60)).toThrow(/cannot hold any step-context notice/);
  });
});

describe('fitEntries positions', () => {
  it('moves each source of the position past its entries covered, keeping the others', () => {
    const g = makeUpdate({ ticket: 'G' });
    const j = makeUpdate({ source: 'jira', ticket: 'PROJ-1' });
    const list: FeedEntry[] = [
      { source: 'generic', seq: 7, update: g },
      { source: 'jira', seq: 4, update: j },
    ];
    expect(fitEntries(list, 1e6, { generic: 6, github: 9 }).cursor).toEqual(at({ generic: 7, github: 9, jira: 4 }));
  });
});

describe('parseCursor', () => {
  it('reads its own cursors; any other cursor reads every stream from where its subscription started', () => {
    expect(parseCursor(undefined)).toEqual({});
    expect(parseCursor(at({ generic: 42, jira: 3 }))).toEqual({ generic: 42, jira: 3 });
    expect(parseCursor(at({ generic: -1, jira: 1.5, github: 2 }))).toEqual({ github: 2 });
    expect(parseCursor({ v: 1, p: { generic: 4 } })).toEqual({});
    expect(parseCursor(42)).toEqual({});
    expect(parseCursor('42')).toEqual({});
    expect(parseCursor({ page: 3 })).toEqual({});
  });
});

describe('FeedStepContext', () => {
  function setup() {
    const subscriptions = new MemorySubscriptionStore();
    const feedStreams = new MemoryFeedStreams({ subscriptions });
    return { feedStreams, subscriptions, feed: new FeedStepContext({ feedStreams, subscriptions }) };
  }
  const fetch = (feed: FeedStepContext, sessionId: string, cursor: Cursor | undefined) =>
    feed.fetch({ sessionId, cursor, maxBytes: 32 * 1024, signal });
  const notices = (...groups: ReturnType<typeof makeUpdate>[][]) =>
    groups.map((g) => ({ kind: 'notice', source: 'hook', content: renderNotice(g), ticketUpdates: refs(...g) }));

  it('returns nothing when nothing is new, then what came after the cursor; a rewind reads it again', async () => {
    const { feedStreams, subscriptions, feed } = setup();
    await subscriptions.subscribe(DEFAULT_TENANT, 's', { source: 'generic', ticket: 'A' });
    expect(await fetch(feed, 's', undefined)).toBeUndefined();
    const u1 = makeUpdate({ ticket: 'A' });
    const u2 = makeUpdate({ ticket: 'A' });
    await feedStreams.append(u1);
    const first = await fetch(feed, 's', undefined);
    expect(first).toEqual({ items: notices([u1]), cursor: at({ generic: 1 }) });
    expect(await fetch(feed, 's', first!.cursor)).toBeUndefined();
    await feedStreams.append(u2);
    expect(await fetch(feed, 's', first!.cursor)).toEqual({ items: notices([u2]), cursor: at({ generic: 2 }) });
    // a rewind to an older cursor reads the same entries again, the same way
    expect(await fetch(feed, 's', undefined)).toEqual({ items: notices([u1, u2]), cursor: at({ generic: 2 }) });
  });

  it('only updates stored after a subscription started reach it', async () => {
    const { feedStreams, subscriptions, feed } = setup();
    await subscriptions.subscribe(DEFAULT_TENANT, 'early', { source: 'generic', ticket: 'A' });
    const u1 = makeUpdate({ ticket: 'A' });
    await feedStreams.append(u1);
    await subscriptions.subscribe(DEFAULT_TENANT, 'late', { source: 'generic', ticket: 'A' });
    const u2 = makeUpdate({ ticket: 'A' });
    await feedStreams.append(u2);
    expect((await fetch(feed, 'early', undefined))?.items).toEqual(notices([u1, u2]));
    expect(await fetch(feed, 'late', undefined)).toEqual({ items: notices([u2]), cursor: at({ generic: 2 }) });
  });

  it('a session following a ticket and a wildcard covering it gets each update once', async () => {
    const { feedStreams, subscriptions, feed } = setup();
    await subscriptions.subscribe(DEFAULT_TENANT, 's', { source: 'github', ticket: 'octo/app#1' });
    await subscriptions.subscribe(DEFAULT_TENANT, 's', { source: 'github', ticket: '*', scope: 'octo/app' });
    const u1 = makeUpdate({ source: 'github', ticket: 'octo/app#1', scope: 'octo/app' });
    const u2 = makeUpdate({ source: 'github', ticket: 'octo/app#2', scope: 'octo/app' });
    const u3 = makeUpdate({ source: 'github', ticket: 'octo/app#1', scope: 'octo/app' });
    for (const u of [u1, u2, u3]) await feedStreams.append(u);
    expect(await fetch(feed, 's', undefined)).toEqual({ items: notices([u1, u3], [u2]), cursor: at({ github: 3 }) });
    expect(await fetch(feed, 's', at({ github: 1 }))).toEqual({
      items: notices([u2], [u3]),
      cursor: at({ github: 3 }),
    });
  });

  it('a cursor holds a position per source; sources no longer followed leave it', async () => {
    const { feedStreams, subscriptions, feed } = setup();
    await subscriptions.subscribe(DEFAULT_TENANT, 's', { source: 'generic', ticket: 'A' });
    await subscriptions.subscribe(DEFAULT_TENANT, 's', { source: 'jira', ticket: 'PROJ-1' });
    const g = makeUpdate({ ticket: 'A' });
    const j = makeUpdate({ source: 'jira', ticket: 'PROJ-1' });
    await feedStreams.append(j);
    await feedStreams.append(g);
    // Sources interleave in the order their updates were stored.
    const first = await fetch(feed, 's', at({ github: 5 }));
    expect(first).toEqual({ items: notices([j], [g]), cursor: at({ generic: 1, jira: 1 }) });
    await subscriptions.unsubscribe(DEFAULT_TENANT, 's', { source: 'jira', ticket: 'PROJ-1' });
    const g2 = makeUpdate({ ticket: 'A' });
    await feedStreams.append(g2);
    expect(await fetch(feed, 's', first!.cursor)).toEqual({ items: notices([g2]), cursor: at({ generic: 2 }) });
  });

  it('rejects when the runner aborted the call', async () => {
    const { feedStreams, subscriptions, feed } = setup();
    await subscriptions.subscribe(DEFAULT_TENANT, 's', { source: 'generic', ticket: 'T-1' });
    await feedStreams.append(makeUpdate());
    const controller = new AbortController();
    controller.abort(new Error('stepContext hook timed out after 5000 ms'));
    await expect(
      feed.fetch({ sessionId: 's', cursor: undefined, maxBytes: 32 * 1024, signal: controller.signal }),
    ).rejects.toThrow(/timed out/);
  });

  it('copySession gives the branch its source position and subscriptions', async () => {
    const { feedStreams, subscriptions, feed } = setup();
    await subscriptions.subscribe(DEFAULT_TENANT, 'src', { source: 'jira', ticket: 'PROJ-1' });
    const u1 = makeUpdate({ source: 'jira', ticket: 'PROJ-1' });
    await feedStreams.append(u1);
    await feed.copySession('src', 'branch', DEFAULT_TENANT);
    expect(await subscriptions.list('branch')).toEqual([{ source: 'jira', ticket: 'PROJ-1' }]);
    expect(await subscriptions.follows('branch')).toEqual(await subscriptions.follows('src'));
    expect(await subscriptions.sessionsFor({ source: 'jira', ticket: 'PROJ-1' })).toEqual(['branch', 'src']);
    expect(await fetch(feed, 'branch', at({ jira: 1 }))).toBeUndefined();
    expect((await fetch(feed, 'branch', undefined))?.cursor).toEqual(at({ jira: 1 }));
  });
});
