/**
 * The in-memory bus holds only what some consumer group still has to read: a
 * record every group of its topic committed is dropped, a topic no group reads
 * keeps its last `retainRecords` per partition, and a group that starts later
 * reads from the oldest record kept, with the offsets the records always had.
 */
import { createMemoryBus, type IncomingRecord, type MemoryBus } from '@ctxflow/bus';
import { afterEach, describe, expect, it } from 'vitest';

const subscriptions: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const s of subscriptions.splice(0)) await s.close();
});

function records(from: number, n: number) {
  return Array.from({ length: n }, (_, i) => ({ key: 'k', value: `v${from + i}` }));
}

/** Subscribes `groupId` to `topic` and resolves with what it handled once `n` records came. */
async function read(bus: MemoryBus, topic: string, groupId: string, n: number): Promise<IncomingRecord[]> {
  const seen: IncomingRecord[] = [];
  let done: () => void = () => {};
  const all = new Promise<void>((resolve) => {
    done = resolve;
  });
  subscriptions.push(
    await bus.subscriber.subscribe({
      topic,
      groupId,
      handle: async (batch) => {
        seen.push(...batch);
        if (seen.length >= n) done();
      },
    }),
  );
  await all;
  // One more turn: the commit of the last batch (and its trim) follows the handler.
  await new Promise((r) => setImmediate(r));
  return seen;
}

describe('memory bus retention', () => {
  it('drops what every group committed; a later group starts at the oldest record kept', async () => {
    const bus = createMemoryBus();
    await bus.publisher.publish('t', records(0, 5_000));
    expect(bus.retainedRecords('t')).toBe(5_000);
    const first = await read(bus, 't', 'a', 5_000);
    expect(first.map((r) => r.value)).toEqual(records(0, 5_000).map((r) => r.value));
    expect(bus.retainedRecords('t')).toBe(0);

    await bus.publisher.publish('t', records(5_000, 3));
    const later = await read(bus, 't', 'b', 3);
    expect(later.map((r) => [r.offset, r.value])).toEqual([
      ['5000', 'v5000'],
      ['5001', 'v5001'],
      ['5002', 'v5002'],
    ]);
  });

  it('keeps what a slower group has not committed', async () => {
    const bus = createMemoryBus();
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    subscriptions.push(await bus.subscriber.subscribe({ topic: 't', groupId: 'slow', handle: () => held }));
    await bus.publisher.publish('t', records(0, 1_000));
    await read(bus, 't', 'fast', 1_000);
    expect(bus.retainedRecords('t')).toBe(1_000);
    release();
  });

  it('a topic nobody reads keeps its last retainRecords per partition, offsets unchanged', async () => {
    const bus = createMemoryBus({ retainRecords: 1_000 });
    for (let i = 0; i < 25; i++) await bus.publisher.publish('t', records(i * 100, 100));
    const kept = bus.retainedRecords('t');
    expect(kept).toBeGreaterThanOrEqual(1_000);
    expect(kept).toBeLessThan(1_000 + 256 + 100);
    const seen = await read(bus, 't', 'late', kept);
    expect(seen.length).toBe(kept);
    expect(seen.map((r) => Number(r.offset))).toEqual(Array.from({ length: kept }, (_, i) => 2_500 - kept + i));
    expect(seen.at(-1)?.value).toBe('v2499');
  });
});
