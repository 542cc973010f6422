export type {
  IncomingRecord,
  OutgoingRecord,
  Publisher,
  SubscribeOptions,
  Subscriber,
  Subscription,
  TopicAdmin,
} from './bus.ts';
export type { MemoryBus, MemoryBusOptions } from './memory-bus.ts';
export { createMemoryBus } from './memory-bus.ts';
export { murmur2, partitionForKey } from './partition-for-key.ts';
