/**
 * The bus on Kafka through @platformatic/kafka 2: the publisher
 * (platformatic-publisher.ts), the consumer on the library's MessagesStream
 * (platformatic-subscription.ts) and topic creation (platformatic-topic-admin.ts).
 * Transactions (the context-row relay's) go through kafkajs's transactional
 * producer (kafkajs-transactions.ts), the one the fault suite holds to exactly
 * once, on a kafkajs client of the same options.
 */

import type { Publisher, Subscriber, TopicAdmin, Transactions } from './bus.ts';
import type { KafkaBusOptions } from './kafka-options.ts';
import { resolveKafkaBusOptions } from './kafka-options.ts';
import { kafkajsClient } from './kafkajs-bus.ts';
import { KafkajsTransactions } from './kafkajs-transactions.ts';
import { PlatformaticPublisher } from './platformatic-publisher.ts';
import { PlatformaticSubscription } from './platformatic-subscription.ts';
import { PlatformaticTopicAdmin } from './platformatic-topic-admin.ts';

export { baseOptions } from './platformatic-options.ts';

export interface PlatformaticBus {
  publisher: Publisher;
  subscriber: Subscriber;
  admin: TopicAdmin;
  transactions: Transactions;
}

export function createPlatformaticBus(options: KafkaBusOptions): PlatformaticBus {
  const resolved = resolveKafkaBusOptions(options);
  return {
    publisher: new PlatformaticPublisher(resolved),
    subscriber: { subscribe: (subscribe) => PlatformaticSubscription.start(resolved, subscribe) },
    admin: new PlatformaticTopicAdmin(resolved),
    transactions: new KafkajsTransactions(kafkajsClient(resolved), resolved),
  };
}
