import { randomUUID } from 'node:crypto';
import type { CreateBusOptions, KafkaClientName, MemoryBus } from '@ctxflow/bus';
import { createBus, createMemoryBus } from '@ctxflow/bus';
import kafkajs from 'kafkajs';
import { recreateKafkaTopic } from '../support/kafka-topics.ts';
import { requireKafka } from '../support/services.ts';
import { busContract } from './bus.contract.ts';

busContract({
  name: 'memory',
  create: () => createMemoryBus({ retryBackoffMs: 20 }),
  recreateTopic: async (bus, name) => (bus as MemoryBus).recreateTopic(name),
  settleMs: 0,
  deliveryTimeoutMs: 5_000,
});

/** Timings short enough for tests: a rebalance round within a few seconds, quick redelivery. */
const testTimings = {
  sessionTimeoutMs: 10_000,
  heartbeatIntervalMs: 500,
  rebalanceTimeoutMs: 10_000,
  maxWaitMs: 200,
  retryBackoffMs: 50,
  connectTimeoutMs: 2_000,
  retries: 3,
} satisfies Partial<CreateBusOptions>;

async function deleteTopics(names: string[]): Promise<void> {
  const admin = new kafkajs.Kafka({
    clientId: 'ctxflow-test-cleanup',
    brokers: requireKafka(),
    logLevel: kafkajs.logLevel.NOTHING,
  }).admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics: names });
  } finally {
    await admin.disconnect();
  }
}

for (const client of ['kafkajs', 'platformatic'] satisfies KafkaClientName[]) {
  busContract({
    name: client,
    create: () =>
      createBus({
        brokers: requireKafka(),
        client,
        clientId: `ctxflow-test-${randomUUID().slice(0, 8)}`,
        ...testTimings,
      }),
    // A port nothing listens on: every connection is refused at once.
    createUnreachable: () =>
      createBus({
        brokers: ['127.0.0.1:1'],
        client,
        clientId: 'ctxflow-test-unreachable',
        ...testTimings,
        connectTimeoutMs: 500,
        requestTimeoutMs: 1_000,
        retries: 2,
      }),
    unreachableBoundMs: 10_000,
    deleteTopics,
    recreateTopic: async (_bus, name, partitions) => {
      await recreateKafkaTopic(requireKafka(), name, partitions);
    },
    commitsTopicId: client === 'kafkajs',
    settleMs: 1_500,
    deliveryTimeoutMs: 20_000,
  });
}
