/**
 * The Transactions port of the bus (bus.ts) on the in-memory bus and on Kafka through kafkajs:
 * a commit's records over two topics (one of them to a named partition) reach a read_committed
 * consumer together; `lastCommitted` names the last committed record of a key in a partition,
 * past other keys' records; a producer opened again under the same transactional id fences the
 * earlier one (its commit rejects with bus_unavailable) and reads what it committed.
 */
import { randomUUID } from 'node:crypto';
import { type Bus, createBus, createMemoryBus, type IncomingRecord } from '@ctxflow/bus';
import { afterAll, describe, expect, it } from 'vitest';
import { requireKafka } from '../support/services.ts';

const buses: Bus[] = [];
afterAll(async () => {
  for (const bus of buses) {
    await bus.publisher.close();
    await bus.admin.close();
  }
});

const setups: [string, () => Bus][] = [
  ['memory', () => createMemoryBus()],
  [
    'kafkajs',
    () =>
      createBus({
        brokers: requireKafka(),
        client: 'kafkajs',
        clientId: `ctxflow-test-tx-${randomUUID().slice(0, 8)}`,
        retries: 3,
        maxWaitMs: 200,
      }),
  ],
];

async function collect(bus: Bus, topic: string, until: (records: IncomingRecord[]) => boolean) {
  const records: IncomingRecord[] = [];
  let done!: () => void;
  const reached = new Promise<void>((resolve) => {
    done = resolve;
  });
  const subscription = await bus.subscriber.subscribe({
    topic,
    groupId: `ctxflow-test-tx-${randomUUID()}`,
    handle: async (batch) => {
      records.push(...batch);
      if (until(records)) done();
    },
  });
  await reached;
  await subscription.close();
  return records;
}

describe.each(setups)('bus transactions on %s', (_name, setup) => {
  it('one commit over two topics is read whole; lastCommitted finds the last record of a key', async () => {
    const bus = setup();
    buses.push(bus);
    const run = randomUUID().slice(0, 8);
    const [events, progress] = [`ctxflow-test-tx-events-${run}`, `ctxflow-test-tx-progress-${run}`];
    await bus.admin.ensureTopics([
      { name: events, partitions: 3 },
      { name: progress, partitions: 2, config: { 'cleanup.policy': 'compact' } },
    ]);
    const id = `ctxflow-test-${run}`;
    const producer = await bus.transactions!.open(id);
    expect(await producer.lastCommitted(progress, 1, id)).toBeUndefined();
    await producer.commit([
      {
        topic: events,
        records: [
          { key: 's1', value: 'e1' },
          { key: 's2', value: 'e2', headers: { h: 'v' } },
        ],
      },
      { topic: progress, partition: 1, records: [{ key: id, value: 'p1' }] },
    ]);
    await producer.commit([
      { topic: events, records: [{ key: 's1', value: 'e3' }] },
      { topic: progress, partition: 1, records: [{ key: id, value: 'p2' }] },
    ]);
    // Another id's record after ours in the same partition: lastCommitted reads past it.
    const other = await bus.transactions!.open(`${id}-other`);
    await other.commit([{ topic: progress, partition: 1, records: [{ key: `${id}-other`, value: 'q1' }] }]);
    await other.close();

    const read = await collect(bus, events, (r) => r.length >= 3);
    expect(read.map((r) => [r.key, r.value]).sort()).toEqual([
      ['s1', 'e1'],
      ['s1', 'e3'],
      ['s2', 'e2'],
    ]);
    expect(read.find((r) => r.value === 'e2')?.headers).toMatchObject({ h: 'v' });
    const last = await producer.lastCommitted(progress, 1, id);
    expect({ key: last?.key, value: last?.value, partition: last?.partition }).toEqual({
      key: id,
      value: 'p2',
      partition: 1,
    });
    expect(await producer.lastCommitted(progress, 0, id)).toBeUndefined();
    await producer.close();
  }, 60_000);

  it('a producer opened again under the same id fences the first, and reads what it committed', async () => {
    const bus = setup();
    buses.push(bus);
    const run = randomUUID().slice(0, 8);
    const progress = `ctxflow-test-tx-progress-${run}`;
    await bus.admin.ensureTopics([{ name: progress, partitions: 1 }]);
    const id = `ctxflow-test-${run}`;
    const first = await bus.transactions!.open(id);
    await first.commit([{ topic: progress, partition: 0, records: [{ key: id, value: 'by first' }] }]);
    const second = await bus.transactions!.open(id);
    await expect(
      first.commit([{ topic: progress, partition: 0, records: [{ key: id, value: 'fenced' }] }]),
    ).rejects.toMatchObject({ code: 'bus_unavailable' });
    expect((await second.lastCommitted(progress, 0, id))?.value).toBe('by first');
    await second.commit([{ topic: progress, partition: 0, records: [{ key: id, value: 'by second' }] }]);
    expect((await second.lastCommitted(progress, 0, id))?.value).toBe('by second');
    await first.close();
    await second.close();
  }, 60_000);
});
