/**
 * KAFKA_TOPIC_PREFIX: every topic a service names goes to the bus prefixed,
 * so tests (the stack start race) and deployments share a broker without
 * sharing topics.
 */
import { createMemoryBus, type IncomingRecord, withTopicPrefix } from '@ctxflow/bus';
import { loadFeedConfig } from '@ctxflow/feed-ingestor';
import type { ConfigError } from '@ctxflow/service-kit';
import { loadRunnerConfig } from '@ctxflow/session-runner';
import { loadStepContextConfig } from '@ctxflow/step-context';
import { describe, expect, it } from 'vitest';

describe('KAFKA_TOPIC_PREFIX', () => {
  it('start race: a prefixed bus publishes, consumes and creates topics under the prefix only', async () => {
    const inner = createMemoryBus();
    const bus = withTopicPrefix(inner, 'run-7.');
    const seen: IncomingRecord[] = [];
    const unprefixed: IncomingRecord[] = [];
    await bus.admin.ensureTopics([{ name: 'ctxflow.ticket-updates.v1', partitions: 2 }]);
    const mine = await bus.subscriber.subscribe({
      topic: 'ctxflow.ticket-updates.v1',
      groupId: 'g',
      handle: async (records) => void seen.push(...records),
    });
    const other = await inner.subscriber.subscribe({
      topic: 'ctxflow.ticket-updates.v1',
      groupId: 'g2',
      handle: async (records) => void unprefixed.push(...records),
    });
    await bus.publisher.publish('ctxflow.ticket-updates.v1', [{ key: 'k', value: '{"n":1}' }]);
    await inner.publisher.publish('ctxflow.ticket-updates.v1', [{ key: 'k', value: '{"n":2}' }]);
    for (let i = 0; i < 100 && (seen.length < 1 || unprefixed.length < 1); i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(seen.map((r) => [r.topic, r.value])).toEqual([['run-7.ctxflow.ticket-updates.v1', '{"n":1}']]);
    expect(unprefixed.map((r) => [r.topic, r.value])).toEqual([['ctxflow.ticket-updates.v1', '{"n":2}']]);
    await mine.close();
    await other.close();
    expect(withTopicPrefix(inner, '')).toBe(inner);
  });

  it('start race: the stack services parse KAFKA_TOPIC_PREFIX (default none) and refuse characters Kafka refuses', () => {
    for (const load of [loadRunnerConfig, loadStepContextConfig, loadFeedConfig]) {
      expect(load({}).kafkaTopicPrefix).toBe('');
      expect(load({ KAFKA_TOPIC_PREFIX: 'test-1.' }).kafkaTopicPrefix).toBe('test-1.');
      let problems: string[] = [];
      try {
        load({ KAFKA_TOPIC_PREFIX: 'a b/' });
      } catch (err) {
        problems = (err as ConfigError).problems;
      }
      expect(problems).toEqual([expect.stringMatching(/^KAFKA_TOPIC_PREFIX: /)]);
    }
  });
});
