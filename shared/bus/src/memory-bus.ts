/**
 * The in-memory bus: the embedded default. It keeps Kafka's observable
 * contract in one process: topics with N partitions (a key always maps to the
 * partition Kafka would pick), offsets as decimal strings, consumer groups that
 * split partitions between their members and keep committed offsets,
 * `resumeFrom` on every assignment, redelivery after a handler rejection, and
 * asynchronous delivery. Nothing survives a restart.
 *
 * Retention: a record every consumer group of its topic has committed is
 * dropped (in chunks, so a long-running process holds only what some group has
 * still to read); a topic no group reads keeps its last `retainRecords` per
 * partition. A group that starts later reads from the oldest record kept, as a
 * Kafka consumer with `auto.offset.reset=earliest` does after retention.
 */
import type { Publisher, Subscriber, Subscription, TopicAdmin, Transactions } from './bus.ts';
import { type Member, MemoryBroker, type MemoryBusOptions } from './memory-broker.ts';
import { memoryTransactions } from './memory-transactions.ts';

export type { MemoryBusOptions } from './memory-broker.ts';

export interface MemoryBus {
  publisher: Publisher;
  subscriber: Subscriber;
  admin: TopicAdmin;
  transactions: Transactions;
  /** Records of `topic` still held, over all its partitions (0 for a topic never seen). */
  retainedRecords(topic: string): number;
  /**
   * Deletes `topic` and creates it again empty, with as many partitions and a
   * new topic id, as an operator would on Kafka: the
   * groups' committed offsets go with it, and each partition's owner is asked
   * `resumeFrom` again (with the new log) before anything more is delivered.
   */
  recreateTopic(topic: string): void;
  /** The id of `topic` (a UUID, new each time it is created); undefined for a topic never seen. */
  topicId(topic: string): string | undefined;
}

export function createMemoryBus(options: MemoryBusOptions = {}): MemoryBus {
  const broker = new MemoryBroker(options);

  const publisher: Publisher = {
    async publish(topic, records) {
      // Like a broker acknowledgement: resolved on a later turn, after the records are stored.
      await Promise.resolve();
      broker.publish(topic, records);
    },
    async close() {},
  };

  const subscriber: Subscriber = {
    async subscribe(subscribeOptions) {
      const member: Member = { options: subscribeOptions, closing: false, inFlight: new Set() };
      broker.join(member);
      let closed: Promise<void> | undefined;
      const subscription: Subscription = {
        async ready() {},
        close() {
          closed ??= (async () => {
            member.closing = true;
            broker.leave(member);
            while (member.inFlight.size > 0) await Promise.allSettled([...member.inFlight]);
          })();
          return closed;
        },
      };
      return subscription;
    },
  };

  const admin: TopicAdmin = {
    async ensureTopics(topics) {
      for (const { name, partitions } of topics) broker.ensureTopic(name, partitions);
    },
    async close() {},
  };

  return {
    publisher,
    subscriber,
    admin,
    transactions: memoryTransactions(broker),
    retainedRecords: (topic) => broker.retained(topic),
    recreateTopic: (topic) => broker.recreate(topic),
    topicId: (topic) => broker.topicId(topic),
  };
}
