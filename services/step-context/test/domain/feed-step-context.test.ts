import { byteLength, DEFAULT_TENANT, MAX_ITEM_BYTES } from '@ctxflow/contracts';
import { type BatchEntry, FeedStepContext, MemoryBatchStore, MemorySubscriptionStore } from '@ctxflow/step-context';
import { describe, expect, it } from 'vitest';
import { fitEntries, parseCursor } from '../../src/domain/feed-step-context.ts';
import { renderNotice } from '../../src/domain/render-notice.ts';
import { makeUpdate } from '../helpers.ts';

const signal = new AbortController().signal;

function entries(...updates: ReturnType<typeof makeUpdate>[]): BatchEntry[] {
  return updates.map((update, i) => ({ cursor: i + 1, update }));
}

describe('fitEntries', () => {
  it('coalesces updates of one ticket into one notice, tickets in order of first appearance', () => {
    const a1 = makeUpdate({ ticket: 'A', summary: 'a1' });
    const b1 = makeUpdate({ ticket: 'B', summary: 'b1' });
    const a2 = makeUpdate({ ticket: 'A', summary: 'a2' });
    const batch = fitEntries(entries(a1, b1, a2), 32 * 1024);
    expect(batch).toEqual({
      items: [
        { kind: 'notice', source: 'hook', content: renderNotice([a1, a2]) },
        { kind: 'notice', source: 'hook', content: renderNotice([b1]) },
      ],
      cursor: 3,
    });
  });

  it('returns whole entries that fit, with the cursor of the last one covered', () => {
    const list = entries(
      ...Array.from({ length: 10 }, (_, i) => makeUpdate({ ticket: `T${i}`, summary: 'y'.repeat(200) })),
    );
    const one = byteLength(fitEntries(list.slice(0, 1), 1e6));
    const three = byteLength(fitEntries(list.slice(0, 3), 1e6));
    expect(fitEntries(list, three).cursor).toBe(3);
    expect(fitEntries(list, three - 1).cursor).toBe(2);
    expect(fitEntries(list, one).cursor).toBe(1);
    expect(byteLength(fitEntries(list, three - 1))).toBeLessThanOrEqual(three - 1);
  });

  it('never lets a coalesced notice pass the per-item limit of the runner', () => {
    const list = entries(
      ...Array.from({ length: 8 }, () => makeUpdate({ ticket: 'BIG', summary: 'z'.repeat(10_000) })),
    );
    const batch = fitEntries(list, 1024 * 1024);
    expect(batch.cursor).toBe(3);
    expect(batch.items).toHaveLength(1);
    expect(byteLength(batch.items[0])).toBeLessThanOrEqual(MAX_ITEM_BYTES);
  });

  it('shortens an entry larger than maxBytes on its own instead of blocking the stream', () => {
    const big = makeUpdate({ ticket: 'HUGE', summary: 'w'.repeat(16_000) });
    const next = makeUpdate({ ticket: 'NEXT' });
    const batch = fitEntries(entries(big, next), 2048);
    expect(batch.cursor).toBe(1);
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

describe('parseCursor', () => {
  it('reads its own cursors; any other cursor starts from the beginning', () => {
    expect(parseCursor(undefined)).toBe(0);
    expect(parseCursor(42)).toBe(42);
    expect(parseCursor('42')).toBe(42);
    expect(parseCursor(-1)).toBe(0);
    expect(parseCursor(1.5)).toBe(0);
    expect(parseCursor({ page: 3 })).toBe(0);
  });
});

describe('FeedStepContext', () => {
  it('returns nothing when nothing is new, then what came after the cursor', async () => {
    const batches = new MemoryBatchStore();
    const feed = new FeedStepContext({ batches, subscriptions: new MemorySubscriptionStore() });
    expect(await feed.fetch({ sessionId: 's', cursor: undefined, maxBytes: 32 * 1024, signal })).toBeUndefined();
    const u1 = makeUpdate({ ticket: 'A' });
    const u2 = makeUpdate({ ticket: 'A' });
    await batches.append('s', u1);
    const first = await feed.fetch({ sessionId: 's', cursor: undefined, maxBytes: 32 * 1024, signal });
    expect(first).toEqual({ items: [{ kind: 'notice', source: 'hook', content: renderNotice([u1]) }], cursor: 1 });
    expect(await feed.fetch({ sessionId: 's', cursor: 1, maxBytes: 32 * 1024, signal })).toBeUndefined();
    await batches.append('s', u2);
    expect(await feed.fetch({ sessionId: 's', cursor: 1, maxBytes: 32 * 1024, signal })).toEqual({
      items: [{ kind: 'notice', source: 'hook', content: renderNotice([u2]) }],
      cursor: 2,
    });
    // a rewind to an older cursor reads the same entries again, the same way
    expect(await feed.fetch({ sessionId: 's', cursor: undefined, maxBytes: 32 * 1024, signal })).toEqual({
      items: [{ kind: 'notice', source: 'hook', content: renderNotice([u1, u2]) }],
      cursor: 2,
    });
  });

  it('rejects when the runner aborted the call', async () => {
    const batches = new MemoryBatchStore();
    await batches.append('s', makeUpdate());
    const feed = new FeedStepContext({ batches, subscriptions: new MemorySubscriptionStore() });
    const controller = new AbortController();
    controller.abort(new Error('stepContext hook timed out after 5000 ms'));
    await expect(
      feed.fetch({ sessionId: 's', cursor: undefined, maxBytes: 32 * 1024, signal: controller.signal }),
    ).rejects.toThrow(/timed out/);
  });

  it('copySession gives the branch its source position and subscriptions', async () => {
    const batches = new MemoryBatchStore();
    const subscriptions = new MemorySubscriptionStore();
    const feed = new FeedStepContext({ batches, subscriptions });
    await subscriptions.subscribe(DEFAULT_TENANT, 'src', { source: 'jira', ticket: 'PROJ-1' });
    const u1 = makeUpdate({ source: 'jira', ticket: 'PROJ-1' });
    await batches.append('src', u1);
    await feed.copySession('src', 'branch', DEFAULT_TENANT);
    expect(await subscriptions.list('branch')).toEqual([{ source: 'jira', ticket: 'PROJ-1' }]);
    expect(await subscriptions.sessionsFor({ source: 'jira', ticket: 'PROJ-1' })).toEqual(['branch', 'src']);
    expect(await feed.fetch({ sessionId: 'branch', cursor: 1, maxBytes: 32 * 1024, signal })).toBeUndefined();
    expect((await feed.fetch({ sessionId: 'branch', cursor: 0, maxBytes: 32 * 1024, signal }))?.cursor).toBe(1);
  });
});
