/**
 * The one piece the platformatic consumer keeps of its own beside the library's
 * MessagesStream (docs/platformatic-kafka.md): an offset out of range ends the
 * stream, the sink is asked again where to resume, told the log as it is, and a
 * new stream reads from there. Against the real broker.
 */
import { randomUUID } from 'node:crypto';
import { Admin } from '@platformatic/kafka';
import { describe, expect, it, onTestFinished } from 'vitest';
import { requireKafka } from '../../../test/support/services.ts';
import type { IncomingRecord, PartitionLog } from '../src/bus.ts';
import { createPlatformaticBus } from '../src/platformatic-bus.ts';

describe('platformatic consumer: an offset out of range', () => {
  it('asks resumeFrom again with the log before any record, then reads from the offset it gives', async () => {
    const bus = createPlatformaticBus({
      brokers: requireKafka(),
      clientId: `ctxflow-test-${randomUUID().slice(0, 8)}`,
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 500,
      rebalanceTimeoutMs: 10_000,
      maxWaitMs: 200,
      retryBackoffMs: 50,
    });
    const topic = `ctxflow-test.platformatic.out-of-range.${randomUUID().slice(0, 8)}`;
    onTestFinished(async () => {
      await Promise.allSettled([bus.publisher.close(), bus.admin.close()]);
      const admin = new Admin({ clientId: 'ctxflow-test-cleanup', bootstrapBrokers: requireKafka() });
      await admin.deleteTopics({ topics: [topic] }).finally(() => admin.close());
    });
    await bus.admin.ensureTopics([{ name: topic, partitions: 1 }]);
    await bus.publisher.publish(
      topic,
      ['a', 'b', 'c'].map((value) => ({ key: 'k', value })),
    );
    const asked: PartitionLog[] = [];
    const handled: IncomingRecord[] = [];
    const subscription = await bus.subscriber.subscribe({
      topic,
      groupId: `g-${topic}`,
      handle: async (records) => {
        handled.push(...records);
      },
      // First a stored offset past the log's end (a log that was replaced), then the log's start.
      resumeFrom: async (_topic, _partition, log) => {
        asked.push(log);
        return asked.length === 1 ? '10' : log.start;
      },
    });
    onTestFinished(() => subscription.close());
    await subscription.ready();
    const deadline = Date.now() + 20_000;
    while (handled.length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(handled.map((r) => [r.offset, r.value])).toEqual([
      ['0', 'a'],
      ['1', 'b'],
      ['2', 'c'],
    ]);
    expect(asked.map(({ start, end }) => ({ start, end }))).toEqual([
      { start: '0', end: '3' },
      { start: '0', end: '3' },
    ]);
    expect(asked[1]?.topicId).toEqual(expect.any(String));
  });
});
