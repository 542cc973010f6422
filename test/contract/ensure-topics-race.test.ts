/**
 * Start race: the stack's services create their topics at start, each on its
 * own; whichever is second gets TOPIC_ALREADY_EXISTS from the broker. Both
 * clients treat that code as success: concurrent `ensureTopics` of the same
 * fresh names, from kafkajs and @platformatic/kafka at once, all resolve and
 * leave every topic usable.
 */
import { randomUUID } from 'node:crypto';
import { type Bus, createBus, type KafkaClientName } from '@ctxflow/bus';
import kafkajs from 'kafkajs';
import { afterAll, describe, expect, it } from 'vitest';
import { onlyTopicAlreadyExists } from '../../shared/bus/src/kafka-options.ts';
import { requireKafka } from '../support/services.ts';

const ROUNDS = 4;
/** Creators per client per round: each round's topics are created by 2 x CREATORS buses at once. */
const CREATORS = 3;
const PARTITIONS = 3;

const created: string[] = [];

afterAll(async () => {
  if (created.length === 0) return;
  const admin = new kafkajs.Kafka({
    clientId: 'ctxflow-test-cleanup',
    brokers: requireKafka(),
    logLevel: kafkajs.logLevel.NOTHING,
  }).admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics: created });
  } finally {
    await admin.disconnect();
  }
});

describe('start race: ensureTopics treats TOPIC_ALREADY_EXISTS as success', () => {
  it('recognises the code inside both clients’ error wrappers, and nothing else', () => {
    // kafkajs: KafkaJSAggregateError of KafkaJSCreateTopicError.
    expect(onlyTopicAlreadyExists({ errors: [{ type: 'TOPIC_ALREADY_EXISTS', code: 36 }] })).toBe(true);
    expect(
      onlyTopicAlreadyExists({
        errors: [
          { type: 'TOPIC_ALREADY_EXISTS', code: 36 },
          { type: 'INVALID_PARTITIONS', code: 37 },
        ],
      }),
    ).toBe(false);
    // @platformatic/kafka: MultipleErrors > ResponseError > ProtocolError.
    const protocol = { code: 'PLT_KFK_PROTOCOL', apiId: 'TOPIC_ALREADY_EXISTS', apiCode: 36 };
    expect(
      onlyTopicAlreadyExists({ code: 'PLT_KFK_MULTIPLE', errors: [{ code: 'PLT_KFK_RESPONSE', errors: [protocol] }] }),
    ).toBe(true);
    expect(onlyTopicAlreadyExists({ code: 'PLT_KFK_MULTIPLE', errors: [{ code: 'PLT_KFK_NETWORK' }] })).toBe(false);
    expect(onlyTopicAlreadyExists({ message: 'wrapped', cause: protocol })).toBe(true);
    expect(onlyTopicAlreadyExists(new Error('TOPIC_ALREADY_EXISTS'))).toBe(false);
    expect(onlyTopicAlreadyExists({ errors: [] })).toBe(false);
  });

  it(`start race: ${ROUNDS} rounds of ${2 * CREATORS} concurrent ensureTopics (kafkajs and platformatic) of fresh names all succeed`, async () => {
    const buses: Bus[] = [];
    for (const client of ['kafkajs', 'platformatic'] satisfies KafkaClientName[]) {
      for (let i = 0; i < CREATORS; i++) {
        buses.push(createBus({ client, clientId: `ctxflow-ensure-race-${client}-${i}`, brokers: requireKafka() }));
      }
    }
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const names = [0, 1].map((i) => `ctxflow.test.ensure-race.${randomUUID()}.${round}.${i}`);
        created.push(...names);
        const outcomes = await Promise.allSettled(
          buses.map((bus) => bus.admin.ensureTopics(names.map((name) => ({ name, partitions: PARTITIONS })))),
        );
        const failures = outcomes.flatMap((o) => (o.status === 'rejected' ? [String(o.reason)] : []));
        expect(failures).toEqual([]);
        // Every topic exists once with its partitions and answers a produce.
        const admin = new kafkajs.Kafka({
          clientId: 'ctxflow-ensure-race-check',
          brokers: requireKafka(),
          logLevel: kafkajs.logLevel.NOTHING,
        }).admin();
        await admin.connect();
        try {
          const { topics } = await admin.fetchTopicMetadata({ topics: names });
          expect(topics.map((t) => [t.name, t.partitions.length]).sort()).toEqual(
            names.map((name) => [name, PARTITIONS]).sort(),
          );
        } finally {
          await admin.disconnect();
        }
        await buses[round % buses.length]!.publisher.publish(names[0]!, [{ key: 'k', value: '{}' }]);
      }
    } finally {
      for (const bus of buses) {
        await bus.admin.close();
        await bus.publisher.close();
      }
    }
  }, 120_000);
});
