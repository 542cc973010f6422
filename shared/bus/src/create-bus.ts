/**
 * Picks the bus adapter from configuration: the in-memory bus when no brokers
 * are given (the embedded default), else Kafka through the chosen client.
 */
import type { Publisher, Subscriber, TopicAdmin } from './bus.ts';
import type { BusLog, KafkaBusOptions } from './kafka-options.ts';
import { createKafkajsBus } from './kafkajs-bus.ts';
import type { MemoryBusOptions } from './memory-bus.ts';
import { createMemoryBus } from './memory-bus.ts';
import { createPlatformaticBus } from './platformatic-bus.ts';

export type KafkaClientName = 'kafkajs' | 'platformatic';

export interface CreateBusOptions extends Omit<KafkaBusOptions, 'brokers'> {
  /** Kafka brokers (`host:port`); absent or empty: the in-memory bus. */
  brokers?: string[];
  client: KafkaClientName;
  clientId: string;
  log?: BusLog;
  /** Options of the in-memory bus, used only when there are no brokers. */
  memory?: MemoryBusOptions;
}

export interface Bus {
  publisher: Publisher;
  subscriber: Subscriber;
  admin: TopicAdmin;
}

export function createBus(options: CreateBusOptions): Bus {
  const { brokers, client, memory, ...kafka } = options;
  if (brokers === undefined || brokers.length === 0) return createMemoryBus(memory);
  const kafkaOptions: KafkaBusOptions = { ...kafka, brokers };
  return client === 'kafkajs' ? createKafkajsBus(kafkaOptions) : createPlatformaticBus(kafkaOptions);
}
