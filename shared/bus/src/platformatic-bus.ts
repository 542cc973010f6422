/**
 * The bus on Kafka through @platformatic/kafka 2: the publisher
 * (platformatic-publisher.ts), the consumer on the library's MessagesStream
 * (platformatic-subscription.ts) and topic creation (platformatic-topic-admin.ts).
 */

import type { Publisher, Subscriber, TopicAdmin } from './bus.ts';
import type { KafkaBusOptions } from './kafka-options.ts';
import { resolveKafkaBusOptions } from './kafka-options.ts';
import { PlatformaticPublisher } from './platformatic-publisher.ts';
import { PlatformaticSubscription } from './platformatic-subscription.ts';
import { PlatformaticTopicAdmin } from './platformatic-topic-admin.ts';

export { baseOptions } from './platformatic-options.ts';

export interface PlatformaticBus {
  publisher: Publisher;
  subscriber: Subscriber;
  admin: TopicAdmin;
}

export function createPlatformaticBus(options: KafkaBusOptions): PlatformaticBus {
  const resolved = resolveKafkaBusOptions(options);
  return {
    publisher: new PlatformaticPublisher(resolved),
    subscriber: { subscribe: (subscribe) => PlatformaticSubscription.start(resolved, subscribe) },
    admin: new PlatformaticTopicAdmin(resolved),
  };
}
