/**
 * Picks the bus adapter from configuration: the in-memory bus when no brokers
 * are given (the embedded default), else Kafka through the chosen client.
 */
import type { Publisher, Subscriber, TopicAdmin, Transactions } from './bus.ts';
import type { BusLog, KafkaBusOptions } from './kafka-options.ts';
import { createKafkajsBus } from './kafkajs-bus.ts';
import type { MemoryBusOptions } from './memory-bus.ts';
import { createMemoryBus } from './memory-bus.ts';
import { createPlatformaticBus } from './platformatic-bus.ts';
import { withTopicPrefix } from './topic-prefix.ts';

export type KafkaClientName = 'kafkajs' | 'platformatic';

export interface CreateBusOptions extends Omit<KafkaBusOptions, 'brokers'> {
  /** Kafka brokers (`host:port`); absent or empty: the in-memory bus. */
  brokers?: string[];
  client: KafkaClientName;
  clientId: string;
  log?: BusLog;
  /** Options of the in-memory bus, used only when there are no brokers. */
  memory?: MemoryBusOptions;
  /** Prefix of every topic name on this bus (`KAFKA_TOPIC_PREFIX`); default none. */
  topicPrefix?: string;
}

export interface Bus {
  publisher: Publisher;
  subscriber: Subscriber;
  admin: TopicAdmin;
  /** Kafka transactions (through kafkajs on both Kafka clients) and the in-memory bus's. */
  transactions: Transactions;
}

export function createBus(options: CreateBusOptions): Bus {
  const { brokers, client, memory, topicPrefix, ...kafka } = options;
  if (brokers === undefined || brokers.length === 0) return createMemoryBus(memory);
  const kafkaOptions: KafkaBusOptions = { ...kafka, brokers };
  const bus: Bus = client === 'kafkajs' ? createKafkajsBus(kafkaOptions) : createPlatformaticBus(kafkaOptions);
  return withTopicPrefix(bus, topicPrefix ?? '');
}
