export type { IncomingRecord, OutgoingRecord, Publisher, SubscribeOptions, Subscriber, Subscription, TopicAdmin } from './bus.ts';
