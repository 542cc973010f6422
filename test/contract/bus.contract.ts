/**
 * The bus contract: every adapter of the port in shared/bus/src/bus.ts passes
 * these tests (the in-memory bus and both Kafka adapters, on a real broker).
 *
 * Longer than 400 lines: the whole port's contract, one describe per behaviour, so that every adapter is held to all of it by one call.
 */
import { randomUUID } from 'node:crypto';
import type {
  CommittedOffset,
  IncomingRecord,
  OutgoingRecord,
  PartitionLog,
  Publisher,
  SubscribeOptions,
  Subscriber,
  Subscription,
  TopicAdmin,
} from '@ctxflow/bus';
import { describe, expect, it, onTestFinished } from 'vitest';
import { partitionForKey } from '../../shared/bus/src/partition-for-key.ts';

export interface BusUnderTest {
  publisher: Publisher;
  subscriber: Subscriber;
  admin: TopicAdmin;
}

export interface BusContractOptions {
  name: string;
  /** A bus on the shared broker; each test makes its own and closes it. */
  create(): BusUnderTest;
  /**
   * A bus whose brokers cannot be reached (a closed port, short timeouts), for
   * the bus_unavailable test. Omitted where there is no broker (memory).
   */
  createUnreachable?(): BusUnderTest;
  /** The most `publish` may take to reject when the broker is unreachable, in ms. */
  unreachableBoundMs?: number;
  /** Removes the test topics afterwards (a real broker keeps them). */
  deleteTopics?(names: string[]): Promise<void>;
  /** Deletes a topic of `bus` and creates it again, empty, with `partitions` (a new topic id). */
  recreateTopic?(bus: BusUnderTest, name: string, partitions: number): Promise<void>;
  /**
   * Whether a commit names the topic id of the log it was read in (default true; @platformatic/kafka
   * commits no metadata).
   */
  commitsTopicId?: boolean;
  /** Time for a consumer group to settle after its members are ready, in ms (Kafka: a rebalance round). */
  settleMs: number;
  /** How long to wait for deliveries, in ms. */
  deliveryTimeoutMs: number;
}

interface Recorder {
  /** Every `handle` call, in call order. */
  readonly calls: IncomingRecord[][];
  /** Records of the calls that resolved, in order. */
  readonly handled: IncomingRecord[];
}

export function busContract(options: BusContractOptions): void {
  const unique = (what: string) => `ctxflow-test.${options.name}.${what}.${randomUUID().slice(0, 8)}`;

  /** A fresh bus and topic for one test; everything is closed (and the topic deleted) after it. */
  async function setup(what: string, partitions: number) {
    const bus = options.create();
    const topic = unique(what);
    const subscriptions: Subscription[] = [];
    onTestFinished(async () => {
      await Promise.allSettled(subscriptions.map((s) => s.close()));
      await Promise.allSettled([bus.publisher.close(), bus.admin.close()]);
      await options.deleteTopics?.([topic]);
    });
    await bus.admin.ensureTopics([{ name: topic, partitions }]);
    const subscribe = async (
      groupId: string,
      recorder: Recorder,
      extra: Partial<Pick<SubscribeOptions, 'handle' | 'resumeFrom'>> = {},
    ): Promise<Subscription> => {
      const subscription = await bus.subscriber.subscribe({
        topic,
        groupId,
        handle: async (records) => {
          recorder.calls.push(records);
          if (extra.handle !== undefined) await extra.handle(records);
          recorder.handled.push(...records);
        },
        ...(extra.resumeFrom === undefined ? {} : { resumeFrom: extra.resumeFrom }),
      });
      subscriptions.push(subscription);
      await subscription.ready();
      return subscription;
    };
    return { bus, topic, subscribe };
  }

  const recorder = (): Recorder => ({ calls: [], handled: [] });

  /** A key `<prefix>-<i>` that lands on `partition` of a topic with `partitions`. */
  const keyOn = (prefix: string, partition: number, partitions: number): string => {
    for (let i = 0; ; i++) if (partitionForKey(`${prefix}-${i}`, partitions) === partition) return `${prefix}-${i}`;
  };

  async function waitFor(what: string, condition: () => boolean): Promise<void> {
    const deadline = Date.now() + options.deliveryTimeoutMs;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(20);
    }
  }

  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const records = (prefix: string, count: number, keys: number): OutgoingRecord[] =>
    Array.from({ length: count }, (_, i) => ({
      key: `${prefix}-${i % keys}`,
      value: `${prefix}-${i % keys}:${Math.floor(i / keys)}`,
    }));

  describe(`bus contract: ${options.name}`, () => {
    it('publish resolves after the records are stored; a new group reads them from the beginning with decimal offsets', async () => {
      const { bus, topic, subscribe } = await setup('ack', 1);
      await bus.publisher.publish(topic, [
        { key: 'a', value: '{"n":1}' },
        { key: 'b', value: '{"n":2}' },
        { key: 'a', value: '{"n":3}' },
      ]);
      const seen = recorder();
      await subscribe(unique('group'), seen);
      await waitFor('3 records', () => seen.handled.length >= 3);
      await sleep(200);
      expect(
        seen.handled.map(({ topic: t, partition, offset, key, value }) => ({ t, partition, offset, key, value })),
      ).toEqual([
        { t: topic, partition: 0, offset: '0', key: 'a', value: '{"n":1}' },
        { t: topic, partition: 0, offset: '1', key: 'b', value: '{"n":2}' },
        { t: topic, partition: 0, offset: '2', key: 'a', value: '{"n":3}' },
      ]);
    });

    it('a key lands on the partition Kafka picks for it: (murmur2(key) & 0x7fffffff) % partitions', async () => {
      const { bus, topic, subscribe } = await setup('partitioner', 4);
      const keys = Array.from({ length: 24 }, (_, i) => `ticket:${i}`);
      await bus.publisher.publish(
        topic,
        keys.map((key) => ({ key, value: key })),
      );
      const seen = recorder();
      await subscribe(unique('group'), seen);
      await waitFor('24 records', () => seen.handled.length >= 24);
      const placed = Object.fromEntries(seen.handled.map((r) => [r.key, r.partition]));
      expect(placed).toEqual(Object.fromEntries(keys.map((key) => [key, partitionForKey(key, 4)])));
      expect(new Set(Object.values(placed)).size).toBeGreaterThan(1);
    });

    it('keeps per-key order across many records; each handle call is one partition in offset order', async () => {
      const { bus, topic, subscribe } = await setup('order', 3);
      const keys = 10;
      const perKey = 100;
      const all = records('order', keys * perKey, keys);
      // Several publish calls, as a producer would make them.
      for (let i = 0; i < all.length; i += 50) await bus.publisher.publish(topic, all.slice(i, i + 50));
      const seen = recorder();
      await subscribe(unique('group'), seen);
      await waitFor(`${all.length} records`, () => seen.handled.length >= all.length);
      await sleep(200);
      expect(seen.handled).toHaveLength(all.length);
      for (let k = 0; k < keys; k++) {
        const values = seen.handled.filter((r) => r.key === `order-${k}`).map((r) => r.value);
        expect(values).toEqual(Array.from({ length: perKey }, (_, i) => `order-${k}:${i}`));
      }
      for (const call of seen.calls) {
        expect(new Set(call.map((r) => r.partition)).size).toBe(1);
        const offsets = call.map((r) => BigInt(r.offset));
        for (let i = 1; i < offsets.length; i++) expect(offsets[i]).toBe((offsets[i - 1] ?? 0n) + 1n);
      }
    });

    it('headers round-trip exactly; a record without headers arrives with {}', async () => {
      const { bus, topic, subscribe } = await setup('headers', 1);
      const headers = {
        traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
        'x-ctxflow-record-id': 'rec-1',
        empty: '',
        unicode: 'é ✓ 日本',
      };
      await bus.publisher.publish(topic, [
        { key: 'k', value: 'with', headers },
        { key: 'k', value: 'without' },
      ]);
      const seen = recorder();
      await subscribe(unique('group'), seen);
      await waitFor('2 records', () => seen.handled.length >= 2);
      expect(seen.handled.map((r) => [r.value, r.headers])).toEqual([
        ['with', headers],
        ['without', {}],
      ]);
    });

    it('two members of one group split the partitions; once the group is stable no record is handled twice', async () => {
      const { bus, topic, subscribe } = await setup('group', 4);
      const groupId = unique('group');
      const a = recorder();
      const b = recorder();
      await subscribe(groupId, a);
      await subscribe(groupId, b);
      await sleep(options.settleMs);
      const all = records('split', 400, 40);
      await bus.publisher.publish(topic, all);
      await waitFor('400 records', () => a.handled.length + b.handled.length >= all.length);
      await sleep(300);
      const positions = [...a.handled, ...b.handled].map((r) => `${r.partition}:${r.offset}`);
      expect(positions).toHaveLength(all.length);
      expect(new Set(positions).size).toBe(all.length);
      const partitionsOf = (r: Recorder) => new Set(r.handled.map((x) => x.partition));
      expect(a.handled.length).toBeGreaterThan(0);
      expect(b.handled.length).toBeGreaterThan(0);
      expect([...partitionsOf(a)].filter((p) => partitionsOf(b).has(p))).toEqual([]);
    });

    it('a handler rejection redelivers the same records, from the failed one, then moves on', async () => {
      const { bus, topic, subscribe } = await setup('redeliver', 1);
      await bus.publisher.publish(topic, records('redo', 5, 1));
      const seen = recorder();
      let failures = 0;
      await subscribe(unique('group'), seen, {
        handle: async (batch) => {
          if (failures < 2 && batch.some((r) => r.offset === '2')) {
            failures++;
            throw new Error('sink down');
          }
        },
      });
      await waitFor('5 handled records', () => seen.handled.length >= 5);
      await sleep(200);
      expect(failures).toBe(2);
      // Every record is handled once in the end, in order.
      expect(seen.handled.map((r) => r.offset)).toEqual(['0', '1', '2', '3', '4']);
      // The calls after each failure start where the failed call started.
      const failedCalls = seen.calls.filter((call) => call.some((r) => r.offset === '2'));
      expect(failedCalls).toHaveLength(3);
      const firstOffsets = failedCalls.map((call) => call[0]?.offset);
      expect(new Set(firstOffsets).size).toBe(1);
    });

    it('committed offsets survive the member: a new member of the group reads only what came after', async () => {
      const { bus, topic, subscribe } = await setup('commit', 2);
      const groupId = unique('group');
      await bus.publisher.publish(topic, records('first', 10, 5));
      const first = recorder();
      const one = await subscribe(groupId, first);
      await waitFor('10 records', () => first.handled.length >= 10);
      await one.close();
      await bus.publisher.publish(topic, records('second', 6, 3));
      const second = recorder();
      await subscribe(groupId, second);
      await waitFor('6 records', () => second.handled.length >= 6);
      await sleep(300);
      expect(second.handled.map((r) => r.value).sort()).toEqual(
        records('second', 6, 3)
          .map((r) => r.value)
          .sort(),
      );
    });

    it('resumeFrom seeks: records before the returned offset never reach the handler', async () => {
      const { bus, topic, subscribe } = await setup('resume', 2);
      // Partition 0 resumes at 6 of 10, partition 1 has no stored offset (group default: earliest).
      const k0 = keyOn('resume', 0, 2);
      const k1 = keyOn('resume', 1, 2);
      await bus.publisher.publish(
        topic,
        Array.from({ length: 10 }, (_, i) => ({ key: k0, value: `p0:${i}` })),
      );
      await bus.publisher.publish(topic, [
        { key: k1, value: 'p1:0' },
        { key: k1, value: 'p1:1' },
      ]);
      const asked: [string, number][] = [];
      const seen = recorder();
      await subscribe(unique('group'), seen, {
        resumeFrom: async (t, partition) => {
          asked.push([t, partition]);
          await sleep(50);
          return partition === 0 ? '6' : undefined;
        },
      });
      await waitFor('6 records', () => seen.handled.length >= 6);
      await sleep(300);
      expect(seen.handled.filter((r) => r.partition === 0).map((r) => [r.offset, r.value])).toEqual([
        ['6', 'p0:6'],
        ['7', 'p0:7'],
        ['8', 'p0:8'],
        ['9', 'p0:9'],
      ]);
      expect(seen.handled.filter((r) => r.partition === 1).map((r) => r.value)).toEqual(['p1:0', 'p1:1']);
      expect(asked.map(([t]) => t).every((t) => t === topic)).toBe(true);
      expect(new Set(asked.map(([, p]) => p))).toEqual(new Set([0, 1]));
    });

    /** Three records on partition 0 of a two-partition topic, read by a group whose resumeFrom records its logs. */
    async function readLogs(what: string) {
      const { bus, topic, subscribe } = await setup(what, 2);
      const k0 = keyOn(what, 0, 2);
      await bus.publisher.publish(
        topic,
        Array.from({ length: 3 }, (_, i) => ({ key: k0, value: `before:${i}` })),
      );
      const told = new Map<number, PartitionLog>();
      /** resumeFrom calls (`resume <partition> <topic id>`) and records handled (`record <value>`), in order. */
      const events: string[] = [];
      const group = unique('group');
      const seen = recorder();
      const subscription = await subscribe(group, seen, {
        handle: async (records) => {
          for (const r of records) events.push(`record ${r.value}`);
        },
        resumeFrom: async (_t, partition, log) => {
          told.set(partition, log);
          events.push(`resume ${partition} ${log.topicId}`);
          return undefined;
        },
      });
      await waitFor('3 records', () => seen.handled.length >= 3);
      return { bus, topic, subscribe, k0, told, events, seen, group, subscription };
    }

    it('resumeFrom is told the partition log: topic id, start, end', async () => {
      const { told } = await readLogs('log');
      const id = told.get(0)?.topicId;
      expect(id).toEqual(expect.any(String));
      expect(told.get(0)).toEqual({ topicId: id, start: '0', end: '3' });
      expect(told.get(1)).toEqual({ topicId: id, start: '0', end: '0' });
    });

    it('resumeFrom is told the group committed offset, with the topic id of the log its commit was read in', async () => {
      const { topic, subscribe, told, group, subscription } = await readLogs('committed');
      const id = told.get(0)?.topicId;
      await subscription.close();
      const committed = new Map<number, CommittedOffset | undefined>();
      await subscribe(group, recorder(), {
        resumeFrom: async (t, partition, _log, offset) => {
          if (t === topic) committed.set(partition, offset);
          return undefined;
        },
      });
      await waitFor('both partitions assigned', () => committed.size >= 2);
      expect(committed.get(0)).toEqual(
        options.commitsTopicId === false ? { offset: '3' } : { offset: '3', topicId: id },
      );
      expect(committed.get(1)).toBeUndefined();
    });

    if (options.recreateTopic !== undefined) {
      const recreateTopic = options.recreateTopic;
      it('a topic deleted and created again is another log: another topic id, offsets from 0', async () => {
        const { bus, topic, subscribe, k0, told, group, subscription } = await readLogs('relog');
        const id = told.get(0)?.topicId;
        await subscription.close();
        await recreateTopic(bus, topic, 2);
        await bus.publisher.publish(topic, [{ key: k0, value: 'after' }]);
        told.clear();
        const again = recorder();
        await subscribe(group, again, {
          resumeFrom: async (_t, partition, log) => {
            told.set(partition, log);
            // A sink that knows better than the group: partition 0 from the new log's start.
            return partition === 0 ? log.start : undefined;
          },
        });
        await waitFor('the record of the new log', () => again.handled.length >= 1);
        await sleep(300);
        const newId = told.get(0)?.topicId;
        expect(newId).toEqual(expect.any(String));
        expect(newId).not.toBe(id);
        expect(told.get(0)).toEqual({ topicId: newId, start: '0', end: '1' });
        expect(again.handled.map((r) => [r.partition, r.offset, r.value])).toEqual([[0, '0', 'after']]);
      });

      it('a topic created again while subscribed: resumeFrom is asked again with the new log before its records are handled', async () => {
        const { bus, topic, k0, told, events, seen } = await readLogs('live');
        const id = told.get(0)?.topicId;
        told.clear();
        await recreateTopic(bus, topic, 2);
        await bus.publisher.publish(topic, [{ key: k0, value: 'after' }]);
        await waitFor('the record of the new log', () => seen.handled.some((r) => r.value === 'after'));
        const newId = told.get(0)?.topicId;
        expect(newId).toEqual(expect.any(String));
        expect(newId).not.toBe(id);
        // The consumer may find the new log before or after 'after' lands in it: its end is 0 or 1.
        const log = told.get(0);
        expect(log && { topicId: log.topicId, start: log.start }).toEqual({ topicId: newId, start: '0' });
        expect(['0', '1']).toContain(log?.end);
        expect(events.indexOf(`resume 0 ${newId}`)).toBeGreaterThan(events.indexOf('record before:2'));
        expect(events.indexOf(`resume 0 ${newId}`)).toBeLessThan(events.indexOf('record after'));
      });
    }

    it('close() waits for the in-flight handler, and nothing is handled after it', async () => {
      const { bus, topic, subscribe } = await setup('close', 1);
      const seen = recorder();
      let started = 0;
      let finished = 0;
      const subscription = await subscribe(unique('group'), seen, {
        handle: async () => {
          started++;
          await sleep(500);
          finished++;
        },
      });
      await bus.publisher.publish(topic, [{ key: 'k', value: 'slow' }]);
      await waitFor('handler start', () => started === 1);
      await subscription.close();
      expect(finished).toBe(1);
      const callsAtClose = seen.calls.length;
      await bus.publisher.publish(topic, [{ key: 'k', value: 'after close' }]);
      await sleep(500);
      expect(seen.calls.length).toBe(callsAtClose);
    });

    if (options.createUnreachable !== undefined) {
      const createUnreachable = options.createUnreachable;
      const bound = options.unreachableBoundMs ?? 10_000;
      it(`publish to an unreachable broker rejects with bus_unavailable within ${bound} ms`, async () => {
        const bus = createUnreachable();
        onTestFinished(async () => {
          await Promise.allSettled([bus.publisher.close(), bus.admin.close()]);
        });
        const started = Date.now();
        const outcome = await bus.publisher.publish(unique('down'), [{ key: 'k', value: 'v' }]).then(
          () => 'resolved',
          (err: unknown) => err,
        );
        expect(Date.now() - started).toBeLessThan(bound);
        expect(outcome).toMatchObject({ name: 'CtxflowError', code: 'bus_unavailable', retryable: true });
        expect((outcome as Error).cause).toBeDefined();
      });
    }
  });
}
