export type {
  CommittedOffset,
  IncomingRecord,
  OutgoingRecord,
  PartitionLog,
  Publisher,
  SubscribeOptions,
  Subscriber,
  Subscription,
  TopicAdmin,
  TopicSpec,
  TopicWrite,
  TransactionalPublisher,
  Transactions,
} from './bus.ts';
export type { Bus, CreateBusOptions, KafkaClientName } from './create-bus.ts';
export { createBus } from './create-bus.ts';
export type { BusLog, KafkaBusOptions, KafkaSasl, KafkaTls } from './kafka-options.ts';
export type { KafkajsBus } from './kafkajs-bus.ts';
export { createKafkajsBus } from './kafkajs-bus.ts';
export type { ReadTopicOptions } from './kafkajs-topic-reader.ts';
export { readTopic, topicReaderConfig } from './kafkajs-topic-reader.ts';
export type { MemoryBus, MemoryBusOptions } from './memory-bus.ts';
export { createMemoryBus } from './memory-bus.ts';
export type { OffsetMismatch, OffsetResetPolicy } from './partition-log.ts';
export {
  DEFAULT_OFFSET_RESET,
  MismatchReports,
  OFFSET_MISMATCH_DESCRIPTIONS,
  OFFSET_RESET_POLICIES,
  offsetMismatch,
} from './partition-log.ts';
export type { PlatformaticBus } from './platformatic-bus.ts';
export { createPlatformaticBus } from './platformatic-bus.ts';
export { withTopicPrefix } from './topic-prefix.ts';
