import type { Publisher, Subscriber, TopicAdmin, TransactionalPublisher, Transactions } from './bus.ts';

interface PrefixableBus {
  publisher: Publisher;
  subscriber: Subscriber;
  admin: TopicAdmin;
  transactions?: Transactions;
}

/**
 * The same bus with every topic name given to it prefixed by `prefix`
 * (`KAFKA_TOPIC_PREFIX`): several deployments, or tests, share one broker
 * without sharing topics. Records are handed to handlers as the broker names
 * them (prefixed), so offsets a sink stores stay per real topic. An empty
 * prefix returns `bus` itself.
 */
export function withTopicPrefix<B extends PrefixableBus>(bus: B, prefix: string): B {
  if (prefix === '') return bus;
  return {
    ...bus,
    publisher: {
      publish: (topic, records) => bus.publisher.publish(`${prefix}${topic}`, records),
      close: () => bus.publisher.close(),
    },
    subscriber: {
      subscribe: (options) => bus.subscriber.subscribe({ ...options, topic: `${prefix}${options.topic}` }),
    },
    admin: {
      ensureTopics: (topics) => bus.admin.ensureTopics(topics.map((t) => ({ ...t, name: `${prefix}${t.name}` }))),
      close: () => bus.admin.close(),
    },
    ...(bus.transactions ? { transactions: prefixedTransactions(bus.transactions, prefix) } : {}),
  } satisfies PrefixableBus;
}

function prefixedTransactions(transactions: Transactions, prefix: string): Transactions {
  return {
    async open(transactionalId) {
      const producer = await transactions.open(transactionalId);
      const prefixed: TransactionalPublisher = {
        commit: (writes) => producer.commit(writes.map((w) => ({ ...w, topic: `${prefix}${w.topic}` }))),
        lastCommitted: (topic, partition, key) => producer.lastCommitted(`${prefix}${topic}`, partition, key),
        close: () => producer.close(),
      };
      return prefixed;
    },
  };
}
