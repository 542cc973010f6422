/**
 * The row relay with Kafka transactions (the bus's Transactions port, here on the in-memory
 * bus): each batch goes out in one transaction with its progress record, so
 * - a batch a relay committed but never removed (killed between commit and removal) is
 *   removed, not published again, by the relay that takes the shard over (Redis outbox);
 * - a commit that landed but answered an error (its outcome unknown) is not published again:
 *   the relay takes the shard over, reads the progress and removes the batch;
 * - the progress record of a shard names the refs its last transaction published.
 */
import { randomUUID } from 'node:crypto';
import { createMemoryBus, type IncomingRecord, type Transactions } from '@ctxflow/bus';
import { DEFAULT_TENANT, TOPICS } from '@ctxflow/contracts';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { requireRedis } from '../../../test/support/services.ts';
import { MemoryRowOutbox } from '../src/adapters/memory-row-outbox.ts';
import { MemorySessionStore } from '../src/adapters/memory-session-store.ts';
import { RedisRowOutbox } from '../src/adapters/redis-row-outbox.ts';
import { RedisSessionStore } from '../src/adapters/redis-session-store.ts';
import {
  CONTEXT_ROW_PROGRESS_TOPIC,
  contextRowRecord,
  type RelayStage,
  startContextRowRelay,
} from '../src/context-row-relay.ts';
import { createEngine } from '../src/create-engine.ts';
import { shardOf } from '../src/ports/row-outbox.ts';

const client = new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
const prefixes: string[] = [];
afterAll(async () => {
  for (const prefix of prefixes) {
    const keys = await client.keys(`${prefix}:*`);
    if (keys.length > 0) await client.del(...keys);
  }
  client.disconnect();
});

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function memoryBusWithTopics(shards: number) {
  const bus = createMemoryBus();
  await bus.admin.ensureTopics([
    { name: TOPICS.contextRows, partitions: 3 },
    { name: CONTEXT_ROW_PROGRESS_TOPIC, partitions: shards },
  ]);
  const records: IncomingRecord[] = [];
  const subscription = await bus.subscriber.subscribe({
    topic: TOPICS.contextRows,
    groupId: 'test',
    handle: async (batch) => {
      records.push(...batch);
    },
  });
  return { bus, records, close: () => subscription.close() };
}

describe('the row relay with transactions', () => {
  it('a batch committed by a relay that died before removing it is removed, not published again, at takeover', async () => {
    const prefix = `ctxtest-rows-tx-${randomUUID().slice(0, 8)}`;
    prefixes.push(prefix);
    const outbox = new RedisRowOutbox(client, { prefix, shards: 2, owner: 'runner-a' });
    const engine = createEngine({ store: new RedisSessionStore(client, { prefix, outbox }) });
    const { sessionId } = await engine.createSession(DEFAULT_TENANT, {});
    await engine.addContext(DEFAULT_TENANT, { sessionId, items: [{ kind: 'notice', content: 'committed once' }] });
    await engine.step(DEFAULT_TENANT, sessionId);
    const shard = shardOf(sessionId, 2);
    const left = await outbox.pending(shard, 10);
    expect(left).toHaveLength(1);

    // The dead relay's last transaction: the event and the progress naming its entry, committed; no removal.
    const { bus, records, close } = await memoryBusWithTopics(2);
    const id = `${prefix}-context-rows-${shard}`;
    const dead = await bus.transactions.open(id);
    await dead.commit([
      { topic: TOPICS.contextRows, records: left.map(contextRowRecord) },
      {
        topic: CONTEXT_ROW_PROGRESS_TOPIC,
        partition: shard,
        records: [{ key: id, value: JSON.stringify({ v: 1, refs: left.map((e) => [e.sessionId, e.ref]) }) }],
      },
    ]);
    await until(() => records.length === 1, 'the dead relay event');

    const restarted = new RedisRowOutbox(client, { prefix, shards: 2, owner: 'runner-a' });
    const relay = startContextRowRelay({
      outbox: restarted,
      publisher: bus.publisher,
      transactions: bus.transactions,
      transactionalIdPrefix: prefix,
      pollMs: 20,
    });
    await until(async () => (await client.xlen(restarted.streamKey(sessionId))) === 0, 'the left entry removed');
    // Fenced by the takeover: the dead relay's producer commits nothing more.
    await expect(dead.commit([{ topic: TOPICS.contextRows, records: [] }])).rejects.toMatchObject({
      code: 'bus_unavailable',
    });

    // A row committed after the takeover is published once; the progress names it.
    await engine.addContext(DEFAULT_TENANT, { sessionId, items: [{ kind: 'notice', content: 'after' }] });
    await engine.step(DEFAULT_TENANT, sessionId);
    await until(() => records.length === 2, 'the new row event');
    await until(async () => (await client.xlen(restarted.streamKey(sessionId))) === 0, 'the new entry removed');
    await relay.close();
    await close();
    const contents = records.map((r) => JSON.parse(r.value).content);
    expect(contents).toEqual(['committed once', 'after']);
    const progress = await (await bus.transactions.open(`${id}-reader`)).lastCommitted(
      CONTEXT_ROW_PROGRESS_TOPIC,
      shard,
      id,
    );
    const refs = JSON.parse(progress!.value).refs as [string, string][];
    expect(refs).toHaveLength(1);
    expect(refs[0]![0]).toBe(sessionId);
  });

  it('a commit that landed but answered an error is not published again', async () => {
    const { bus, records, close } = await memoryBusWithTopics(1);
    // Each producer's first commit lands and then rejects, as a commit whose answer was lost.
    let lost = 0;
    const transactions: Transactions = {
      async open(transactionalId) {
        const producer = await bus.transactions.open(transactionalId);
        let first = true;
        return {
          ...producer,
          async commit(writes) {
            await producer.commit(writes);
            if (first && lost === 0) {
              first = false;
              lost += 1;
              throw new Error('the commit answer was lost');
            }
          },
          lastCommitted: (...args) => producer.lastCommitted(...args),
          close: () => producer.close(),
        };
      },
    };
    const outbox = new MemoryRowOutbox({ shards: 1 });
    const failures: RelayStage[] = [];
    const warnings: object[] = [];
    const relay = startContextRowRelay({
      outbox,
      publisher: bus.publisher,
      transactions,
      pollMs: 20,
      retryMs: 20,
      log: { warn: (obj) => warnings.push(obj) },
      telemetry: { published() {}, failed: (e) => failures.push(e.stage) },
    });
    const engine = createEngine({ store: new MemorySessionStore({ outbox }) });
    const { sessionId } = await engine.createSession(DEFAULT_TENANT, {});
    await engine.addContext(DEFAULT_TENANT, {
      sessionId,
      items: [
        { kind: 'notice', content: 'one' },
        { kind: 'notice', content: 'two' },
      ],
    });
    await engine.step(DEFAULT_TENANT, sessionId);
    await until(async () => (await outbox.pending(0, 10)).length === 0 && records.length >= 2, 'the rows relayed');
    await engine.addContext(DEFAULT_TENANT, { sessionId, items: [{ kind: 'notice', content: 'three' }] });
    await engine.step(DEFAULT_TENANT, sessionId);
    await until(() => records.length >= 3, 'the third row');
    await relay.close();
    await close();
    expect(records.map((r) => JSON.parse(r.value).content)).toEqual(['one', 'two', 'three']);
    expect(failures).toEqual(['publish']);
    expect(warnings).toEqual([expect.objectContaining({ shard: 0, stage: 'publish' })]);
  });
});
