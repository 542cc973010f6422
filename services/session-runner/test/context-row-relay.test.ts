/**
 * Context-row events (CTXFLOW_CONTEXT_ROW_EVENTS) through the row outbox and its relay, on
 * the in-memory store and outbox, on Redis and on a Redis Cluster (the outbox stream in the
 * session's slot, its index in another), onto an in-memory bus: one event per committed row,
 * none for a replayed step request, none from a store without an outbox; and a Redis outbox
 * that a relay left (died before removing it) published by the next relay.
 */
import { randomUUID } from 'node:crypto';
import { createMemoryBus, type IncomingRecord } from '@ctxflow/bus';
import { contextRowEventDataSchema, DEFAULT_TENANT, TOPICS } from '@ctxflow/contracts';
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { requireRedis, requireRedisCluster } from '../../../test/support/services.ts';
import { MemoryRowOutbox } from '../src/adapters/memory-row-outbox.ts';
import { MemorySessionStore } from '../src/adapters/memory-session-store.ts';
import { RedisRowOutbox } from '../src/adapters/redis-row-outbox.ts';
import { RedisSessionStore } from '../src/adapters/redis-session-store.ts';
import { contextRowEventData, startContextRowRelay } from '../src/context-row-relay.ts';
import { createEngine } from '../src/create-engine.ts';
import { type RowOutbox, shardOf } from '../src/ports/row-outbox.ts';
import type { SessionStore } from '../src/ports/session-store.ts';

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

function redisPair(client: Redis | Cluster, options: { owner?: string; prefix?: string } = {}) {
  const prefix = options.prefix ?? `ctxtest-rows-${randomUUID().slice(0, 8)}`;
  prefixes.push([client, prefix]);
  const outbox = new RedisRowOutbox(client, { prefix, ...(options.owner ? { owner: options.owner } : {}) });
  return { prefix, outbox, store: new RedisSessionStore(client, { prefix, outbox }) };
}

const standalone = () => {
  const client = new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
  clients.push(client);
  return client;
};
const cluster = () => {
  const client = new Cluster(requireRedisCluster(), { redisOptions: { maxRetriesPerRequest: 3 } });
  clients.push(client);
  return client;
};

const setups: [string, () => { store: SessionStore; outbox: RowOutbox }][] = [
  [
    'memory',
    () => {
      const outbox = new MemoryRowOutbox();
      return { outbox, store: new MemorySessionStore({ outbox }) };
    },
  ],
  ['Redis', () => redisPair(standalone())],
  ['Redis Cluster', () => redisPair(cluster())],
];

/** Entries pending over all the outbox's shards. */
async function pendingEverywhere(outbox: RowOutbox): Promise<number> {
  let n = 0;
  for (let shard = 0; shard < outbox.shards; shard++) n += (await outbox.pending(shard, 10)).length;
  return n;
}

/** Every record of TOPICS.contextRows on `bus`, as it arrives. */
async function listen(bus: ReturnType<typeof createMemoryBus>) {
  const records: IncomingRecord[] = [];
  const subscription = await bus.subscriber.subscribe({
    topic: TOPICS.contextRows,
    groupId: 'test',
    handle: async (batch) => {
      records.push(...batch);
    },
  });
  await subscription.ready();
  return { records, close: () => subscription.close() };
}

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe.each(setups)('context-row events on %s', (_name, setup) => {
  it('one event per committed row, with the row as committed; a replayed step request publishes nothing', async () => {
    const { store, outbox } = setup();
    const bus = createMemoryBus();
    const events = await listen(bus);
    const relay = startContextRowRelay({ outbox, publisher: bus.publisher, pollMs: 50 });
    const engine = createEngine({ store });
    const { sessionId } = await engine.createSession(DEFAULT_TENANT, {});
    await engine.addContext(DEFAULT_TENANT, {
      sessionId,
      items: [
        { kind: 'notice', content: 'first' },
        { kind: 'tools', disable: ['search'] },
      ],
    });
    await engine.step(DEFAULT_TENANT, sessionId, { requestId: 'r1' });
    await engine.addContext(DEFAULT_TENANT, { sessionId, items: [{ kind: 'instruction', content: 'second' }] });
    await engine.step(DEFAULT_TENANT, sessionId, { requestId: 'r2' });
    await engine.step(DEFAULT_TENANT, sessionId, { requestId: 'r1' }); // replayed: commits nothing

    const log = (await store.load(sessionId))!.log.filter((e) => e.type === 'row');
    expect(log.map((e) => e.type === 'row' && e.row.content)).toEqual(['first', undefined, 'second']);
    await until(() => events.records.length >= 3, 'three events');
    await until(async () => (await pendingEverywhere(outbox)) === 0, 'an empty outbox');
    expect(events.records).toHaveLength(3);
    expect(events.records.map((r) => r.headers.ce_id)).toEqual(log.map((e) => e.type === 'row' && e.row.id));
    for (const [i, record] of events.records.entries()) {
      const entry = log[i]!;
      if (entry.type !== 'row') throw new Error('not a row');
      expect(record.key).toBe(sessionId);
      expect(record.headers).toMatchObject({
        'content-type': 'application/json',
        ce_specversion: '1.0',
        ce_type: 'dev.ctxflow.context-row.v1',
        ce_source: `/sessions/${sessionId}`,
        ce_subject: sessionId,
        ce_ctxflowtenant: DEFAULT_TENANT,
        ce_partitionkey: sessionId,
        ce_time: new Date(entry.at).toISOString(),
      });
      const data = contextRowEventDataSchema.parse(JSON.parse(record.value));
      expect(data).toEqual({
        tenant: DEFAULT_TENANT,
        sessionId,
        stepId: entry.stepId,
        rowId: entry.row.id,
        seq: entry.seq,
        kind: entry.row.kind,
        source: 'app',
        ...(entry.row.content !== undefined ? { content: entry.row.content } : {}),
        ...(entry.row.disable !== undefined ? { disable: entry.row.disable } : {}),
        ...(entry.itemId !== undefined ? { itemId: entry.itemId } : {}),
        at: entry.at,
      });
    }
    await relay.close();
    await events.close();
  });
});

describe('the event of a hook row', () => {
  it('names the ticket updates the row carried, in order', () => {
    const ticketUpdates = [
      { source: 'zendesk', eventId: 'evt-1' },
      { source: 'zendesk', eventId: 'evt-2' },
    ];
    const cursor = { v: 2, p: { zendesk: 2 } };
    const data = contextRowEventData({
      ref: '1-0',
      tenant: DEFAULT_TENANT,
      sessionId: 'ses_hook',
      row: {
        type: 'row',
        seq: 4,
        stepId: 'stp_1',
        at: '2026-12-03T10:00:00.000Z',
        row: {
          id: 'row_1',
          role: 'context',
          kind: 'notice',
          source: 'hook',
          content: 'Ticket 42',
          cursor,
          ticketUpdates,
        },
      },
    });
    expect(contextRowEventDataSchema.parse(data)).toEqual({
      tenant: DEFAULT_TENANT,
      sessionId: 'ses_hook',
      stepId: 'stp_1',
      rowId: 'row_1',
      seq: 4,
      kind: 'notice',
      source: 'hook',
      content: 'Ticket 42',
      cursor,
      ticketUpdates,
      at: '2026-12-03T10:00:00.000Z',
    });
  });
});

describe('context-row events off, and a relay that died', () => {
  it('a store without an outbox writes none (the Redis commit script gets no outbox key)', async () => {
    const client = standalone();
    const prefix = `ctxtest-rows-off-${randomUUID().slice(0, 8)}`;
    prefixes.push([client, prefix]);
    const engine = createEngine({ store: new RedisSessionStore(client, { prefix }) });
    const { sessionId } = await engine.createSession(DEFAULT_TENANT, {});
    await engine.addContext(DEFAULT_TENANT, { sessionId, items: [{ kind: 'notice', content: 'n' }] });
    await engine.step(DEFAULT_TENANT, sessionId);
    const indexes = Array.from({ length: 4 }, (_, shard) => `${prefix}:{outbox:${shard}}:sessions`);
    expect(await client.exists(`${prefix}:{${sessionId}}:outbox`, ...indexes)).toBe(0);
  });

  it('rows committed but never relayed (the process died) are published by the next relay, once removed', async () => {
    const client = standalone();
    const first = redisPair(client, { owner: 'runner-a' });
    const engine = createEngine({ store: first.store });
    const { sessionId } = await engine.createSession(DEFAULT_TENANT, {});
    await engine.addContext(DEFAULT_TENANT, { sessionId, items: [{ kind: 'notice', content: 'left behind' }] });
    await engine.step(DEFAULT_TENANT, sessionId);
    // No relay ran: the row waits in the outbox, marked in the index.
    expect(await client.xlen(`${first.prefix}:{${sessionId}}:outbox`)).toBe(1);
    const shard = shardOf(sessionId, first.outbox.shards);
    expect(await client.zcard(`${first.prefix}:{outbox:${shard}}:sessions`)).toBe(1);

    // A new process under the same owner name (a restart): its first sweep reads every mark.
    const restarted = new RedisRowOutbox(client, { prefix: first.prefix, owner: 'runner-a' });
    const bus = createMemoryBus();
    const events = await listen(bus);
    const relay = startContextRowRelay({ outbox: restarted, publisher: bus.publisher, pollMs: 50 });
    await until(() => events.records.length === 1, 'the left row published');
    await until(async () => (await client.xlen(`${first.prefix}:{${sessionId}}:outbox`)) === 0, 'the outbox emptied');
    expect(JSON.parse(events.records[0]!.value)).toMatchObject({ sessionId, content: 'left behind' });
    await relay.close();
    await events.close();
  });
});
