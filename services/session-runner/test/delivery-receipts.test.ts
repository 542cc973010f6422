/**
 * Delivery receipts through the row outbox with context-row events off (the default), on
 * the in-memory store and outbox, on Redis and on a Redis Cluster: the outbox takes only
 * the hook rows that carry ticket updates, the relay publishes nothing and records each
 * update's receipt (session, step, row, request id) in the delivery index, once per
 * session; a commit without ticket updates writes no outbox entry and no mark.
 */
import { randomUUID } from 'node:crypto';
import { createMemoryBus, type IncomingRecord } from '@ctxflow/bus';
import { DEFAULT_TENANT, TOPICS } from '@ctxflow/contracts';
import { type DeliveryReceipt, MemoryDeliveryIndex } from '@ctxflow/feeds';
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { requireRedis, requireRedisCluster } from '../../../test/support/services.ts';
import { MemoryRowOutbox } from '../src/adapters/memory-row-outbox.ts';
import { MemorySessionStore } from '../src/adapters/memory-session-store.ts';
import { RedisRowOutbox } from '../src/adapters/redis-row-outbox.ts';
import { RedisSessionStore } from '../src/adapters/redis-session-store.ts';
import { startContextRowRelay } from '../src/context-row-relay.ts';
import { createEngine } from '../src/create-engine.ts';
import { deliveryReceipts, receiptsOf } from '../src/delivery-receipts.ts';
import type { ReceiptSink } from '../src/ports/receipt-sink.ts';
import type { RowOutbox } from '../src/ports/row-outbox.ts';
import type { SessionStore } from '../src/ports/session-store.ts';
import type { StepContextSource } from '../src/ports/step-context-source.ts';

const clients: (Redis | Cluster)[] = [];
const prefixes: [Redis | Cluster, string][] = [];
afterAll(async () => {
  for (const [client, prefix] of prefixes) {
    const nodes = client instanceof Cluster ? client.nodes('master') : [client];
    for (const node of nodes) {
      const keys = await node.keys(`${prefix}:*`);
      for (const key of keys) await client.del(key);
    }
  }
  for (const client of clients) client.disconnect();
});

interface Setup {
  store: SessionStore;
  outbox: RowOutbox;
  /** Whether the session has outbox entries or a mark in the outbox's index (Redis: the keys). */
  outboxWritten?(sessionId: string): Promise<boolean>;
}

function redisSetup(client: Redis | Cluster): Setup {
  clients.push(client);
  const prefix = `ctxtest-receipts-${randomUUID().slice(0, 8)}`;
  prefixes.push([client, prefix]);
  const outbox = new RedisRowOutbox(client, { prefix, events: false });
  return {
    outbox,
    store: new RedisSessionStore(client, { prefix, outbox }),
    outboxWritten: async (sessionId) =>
      (await client.exists(`${prefix}:{${sessionId}}:outbox`)) + (await client.exists(`${prefix}:{outbox}:sessions`)) >
      0,
  };
}

const setups: [string, () => Setup][] = [
  [
    'memory',
    () => {
      const outbox = new MemoryRowOutbox({ events: false });
      return { outbox, store: new MemorySessionStore({ outbox }) };
    },
  ],
  ['Redis', () => redisSetup(new Redis(requireRedis(), { maxRetriesPerRequest: 3 }))],
  [
    'Redis Cluster',
    () => redisSetup(new Cluster(requireRedisCluster(), { redisOptions: { maxRetriesPerRequest: 3 } })),
  ],
];

/** A stepContext hook that answers each fetch with the next batch given (then nothing). */
function hookOf(batches: unknown[]): StepContextSource {
  return { fetch: async () => batches.shift() };
}

const notice = (content: string, ...eventIds: string[]) => ({
  kind: 'notice',
  source: 'hook',
  content,
  ticketUpdates: eventIds.map((eventId) => ({ source: 'zendesk', eventId })),
});

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe.each(setups)('delivery receipts on %s', (_name, setup) => {
  it("records each update's receipt with its step and request id; publishes nothing; first step per session wins", async () => {
    const { store, outbox } = setup();
    const bus = createMemoryBus();
    const published: IncomingRecord[] = [];
    const subscription = await bus.subscriber.subscribe({
      topic: TOPICS.contextRows,
      groupId: 'test',
      handle: async (batch) => {
        published.push(...batch);
      },
    });
    await subscription.ready();
    const index = new MemoryDeliveryIndex();
    const sunk: DeliveryReceipt[] = [];
    const sink: ReceiptSink = { enqueue: async (receipts) => void sunk.push(...receipts) };
    const relay = startContextRowRelay({ outbox, onEntries: deliveryReceipts({ index, sink }), pollMs: 50 });
    const a = `evt-${randomUUID()}`;
    const b = `evt-${randomUUID()}`;
    const feed = hookOf([
      { items: [notice('two updates', a, b)], cursor: { v: 2, p: { zendesk: 2 } } },
      { items: [notice('a again', a)], cursor: { v: 2, p: { zendesk: 3 } } },
    ]);
    const engine = createEngine({ store, feed });
    const { sessionId } = await engine.createSession(DEFAULT_TENANT, {});
    const first = await engine.step(DEFAULT_TENANT, sessionId, { requestId: 'req-1' });
    await engine.step(DEFAULT_TENANT, sessionId, { requestId: 'req-2' });

    const rows = (await store.load(sessionId))!.log.filter((e) => e.type === 'row');
    expect(rows.map((e) => e.type === 'row' && e.row.content)).toEqual(['two updates', 'a again']);
    await until(async () => (await index.receipts(DEFAULT_TENANT, 'zendesk', b)).length === 1, 'the receipts');
    await until(
      async () =>
        (await Promise.all(Array.from({ length: outbox.shards }, (_, shard) => outbox.pending(shard, 10)))).flat()
          .length === 0,
      'an empty outbox',
    );
    const stepId = first.stepId;
    const expected = (eventId: string) => ({
      tenant: DEFAULT_TENANT,
      source: 'zendesk',
      eventId,
      sessionId,
      stepId,
      rowId: `${stepId}.0`,
      requestId: 'req-1',
      at: rows[0]!.at,
    });
    // The second step's row carries `a` again: the first step's receipt stays.
    expect(await index.receipts(DEFAULT_TENANT, 'zendesk', a)).toEqual([expected(a)]);
    expect(await index.receipts(DEFAULT_TENANT, 'zendesk', b)).toEqual([expected(b)]);
    // The sink gets the receipts as kept (a batch with both steps hands `a` once, two batches twice).
    expect(sunk.slice(0, 2)).toEqual([expected(a), expected(b)]);
    expect(sunk.slice(2)).toEqual(sunk.slice(2).map(() => expected(a)));
    await relay.close();
    await subscription.close();
    expect(published).toEqual([]);
  });

  it('a commit without ticket updates writes nothing to the outbox', async () => {
    const { store, outbox, outboxWritten } = setup();
    const engine = createEngine({
      store,
      feed: hookOf([{ items: [{ kind: 'notice', content: 'plain' }], cursor: 1 }]),
    });
    const { sessionId } = await engine.createSession(DEFAULT_TENANT, {});
    await engine.addContext(DEFAULT_TENANT, { sessionId, items: [{ kind: 'instruction', content: 'app row' }] });
    await engine.step(DEFAULT_TENANT, sessionId);
    expect((await store.load(sessionId))!.log.filter((e) => e.type === 'row')).toHaveLength(2);
    expect(
      (await Promise.all(Array.from({ length: outbox.shards }, (_, shard) => outbox.pending(shard, 10)))).flat(),
    ).toEqual([]);
    if (outboxWritten) expect(await outboxWritten(sessionId)).toBe(false);
  });
});

describe('receiptsOf', () => {
  it('one receipt per update and session, the first row of the batch that carries it; other rows give none', () => {
    const row = (stepId: string, eventIds: string[], requestId?: string) => ({
      ref: stepId,
      tenant: 'acme',
      sessionId: 'ses_1',
      ...(requestId ? { requestId } : {}),
      row: {
        type: 'row' as const,
        seq: 0,
        stepId,
        at: `2026-01-01T00:00:0${stepId.length}.000Z`,
        row: {
          id: `${stepId}.0`,
          role: 'context' as const,
          kind: 'notice' as const,
          source: 'hook' as const,
          content: 'n',
          ...(eventIds.length ? { ticketUpdates: eventIds.map((eventId) => ({ source: 'github', eventId })) } : {}),
        },
      },
    });
    expect(receiptsOf([row('s1', ['e1'], 'r1'), row('s22', []), row('s333', ['e1', 'e2'])])).toEqual([
      {
        tenant: 'acme',
        source: 'github',
        eventId: 'e1',
        sessionId: 'ses_1',
        stepId: 's1',
        rowId: 's1.0',
        requestId: 'r1',
        at: '2026-01-01T00:00:02.000Z',
      },
      {
        tenant: 'acme',
        source: 'github',
        eventId: 'e2',
        sessionId: 'ses_1',
        stepId: 's333',
        rowId: 's333.0',
        at: '2026-01-01T00:00:04.000Z',
      },
    ]);
  });
});
