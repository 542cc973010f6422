import { randomUUID } from 'node:crypto';
import { createMemoryBus } from '@ctxflow/bus';
import { byteLength, type Cursor, DEFAULT_TENANT, ticketKey } from '@ctxflow/contracts';
import {
  FeedStepContext,
  type FeedStreams,
  MemoryFeedStreams,
  RedisFeedStreams,
  StepContextService,
} from '@ctxflow/step-context';
import { MemorySubscriptionStore, RedisSubscriptionStore, type SubscriptionStore } from '@ctxflow/subscriptions';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { runHook } from '../../services/session-runner/src/domain/hook-batch.ts';
import { deleteKeys, eventually, makeUpdate, uniquePrefix } from '../../services/step-context/test/helpers.ts';
import { requireRedis } from '../support/services.ts';

const MAX_BYTES = 32 * 1024;

/** The markers `#0000`..`#0999` of the update lines, in the order the notices show them. */
function markers(content: string): string[] {
  return [...content.matchAll(/"update #(\d{4}) /g)].map((m) => m[1]!);
}

/**
 * Issue 3's batch test: 1,000 queued updates of about 1 KiB, consumed from the
 * bus, drain across successive stepContext calls made exactly as the runner
 * makes them (runHook: validation, byte limit, R27 fitting): every batch within
 * maxBytes, nothing left out by the runner, no update lost, repeated or reordered.
 */
async function drainThousand(stores: { feedStreams: FeedStreams; subscriptions: SubscriptionStore }, tickets: number) {
  const topic = `ticket-updates-${randomUUID()}`;
  const sessionId = `s-${randomUUID()}`;
  await stores.subscriptions.subscribe(DEFAULT_TENANT, sessionId, { source: 'generic', ticket: '*' });
  const bus = createMemoryBus({ retryBackoffMs: 10 });
  const service = new StepContextService({ subscriber: bus.subscriber, topic, ...stores });
  await service.start();
  const updates = Array.from({ length: 1000 }, (_, i) => {
    const n = String(i).padStart(4, '0');
    return makeUpdate({ ticket: `T-${i % tickets}`, summary: `update #${n} ${'lorem ipsum '.repeat(80)}`.trim() });
  });
  expect(byteLength(updates[0]!.summary)).toBeGreaterThan(960);
  await bus.publisher.publish(
    topic,
    updates.map((u) => ({ key: ticketKey(u), value: JSON.stringify(u) })),
  );
  await eventually(async () => expect(await stores.feedStreams.resumeFrom(topic, 0)).toBe('1000'), 20_000);
  await service.stop();

  const feed = new FeedStepContext(stores);
  let cursor: Cursor | undefined;
  const seen: string[] = [];
  const perTicket = new Map<string, string[]>();
  let feedStreams = 0;
  for (;;) {
    const outcome = await runHook(feed, { sessionId, cursor }, { maxBytes: MAX_BYTES, timeoutMs: 5_000 });
    if (outcome.type === 'none') break;
    expect(outcome.type).toBe('batch');
    if (outcome.type !== 'batch') break;
    feedStreams++;
    expect(outcome.leftOut).toBe(0);
    expect(byteLength({ items: outcome.items, cursor: outcome.cursor })).toBeLessThanOrEqual(MAX_BYTES);
    expect(outcome.cursor).not.toEqual(cursor);
    for (const item of outcome.items) {
      expect(item).toMatchObject({ kind: 'notice', source: 'hook' });
      const content = (item as { content: string }).content;
      const ticket = /^ticket: "(.*)"$/m.exec(content)![1]!;
      const found = markers(content);
      seen.push(...found);
      perTicket.set(ticket, [...(perTicket.get(ticket) ?? []), ...found]);
    }
    cursor = outcome.cursor;
  }
  return { seen, perTicket, feedStreams, cursor };
}

function expectDrained(result: Awaited<ReturnType<typeof drainThousand>>, tickets: number) {
  const all = Array.from({ length: 1000 }, (_, i) => String(i).padStart(4, '0'));
  expect([...result.seen].sort()).toEqual(all); // none lost, none repeated
  for (let t = 0; t < tickets; t++) {
    expect(result.perTicket.get(`T-${t}`)).toEqual(all.filter((n) => Number(n) % tickets === t)); // per-ticket order
  }
  expect(result.cursor).toEqual({ v: 2, p: { generic: 1000 } });
}

function memoryStores() {
  const subscriptions = new MemorySubscriptionStore();
  return { feedStreams: new MemoryFeedStreams({ subscriptions }), subscriptions };
}

describe('1,000 queued updates drain within maxBytes (issue 3 batch test)', () => {
  it('memory, 1,000 tickets: every update once, in arrival order', async () => {
    const result = await drainThousand(memoryStores(), 1000);
    expectDrained(result, 1000);
    expect(result.seen).toEqual([...result.seen].sort()); // global order kept: one ticket per update
    expect(result.feedStreams).toBeGreaterThan(30);
  });

  it('memory, 7 tickets (coalesced per batch): every update once, in order per ticket', async () => {
    const result = await drainThousand(memoryStores(), 7);
    expectDrained(result, 7);
  });

  it('redis, 1,000 tickets: every update once, in arrival order', async () => {
    const redis = new Redis(requireRedis(), { maxRetriesPerRequest: 2 });
    const prefix = uniquePrefix();
    try {
      const result = await drainThousand(
        {
          feedStreams: new RedisFeedStreams({ redis, prefix }),
          subscriptions: new RedisSubscriptionStore({ redis, prefix }),
        },
        1000,
      );
      expectDrained(result, 1000);
      expect(result.seen).toEqual([...result.seen].sort());
    } finally {
      await deleteKeys(redis, prefix);
      await redis.quit();
    }
  });
});
