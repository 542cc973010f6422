/**
 * The bus on Kafka through kafkajs 2.2: the publisher (kafkajs-publisher.ts),
 * the consumer (kafkajs-subscription.ts) and topic creation
 * (kafkajs-topic-admin.ts) on one kafkajs client, its log routed to the bus log.
 */

import type { Kafka, KafkaConfig, LogEntry } from 'kafkajs';
import kafkajs from 'kafkajs';
import type { Publisher, Subscriber, TopicAdmin, Transactions } from './bus.ts';
import type { KafkaBusOptions, ResolvedKafkaBusOptions } from './kafka-options.ts';
import { resolveKafkaBusOptions } from './kafka-options.ts';
import { KafkajsPublisher } from './kafkajs-publisher.ts';
import { KafkajsSubscriber } from './kafkajs-subscription.ts';
import { KafkajsTopicAdmin } from './kafkajs-topic-admin.ts';
import { KafkajsTransactions } from './kafkajs-transactions.ts';

export { KafkajsPublisher } from './kafkajs-publisher.ts';

const { Kafka: KafkaClient, logLevel } = kafkajs;

export interface KafkajsBus {
  publisher: Publisher;
  subscriber: Subscriber;
  admin: TopicAdmin;
  transactions: Transactions;
}

/** A kafkajs client of the bus's options, its WARN and ERROR logs routed to the bus log. */
export function kafkajsClient(resolved: ResolvedKafkaBusOptions): Kafka {
  return new KafkaClient({
    clientId: resolved.clientId,
    brokers: resolved.brokers,
    connectionTimeout: resolved.connectTimeoutMs,
    requestTimeout: resolved.requestTimeoutMs,
    retry: { retries: resolved.retries },
    ...kafkajsSecurity(resolved),
    // kafkajs logs through console by default; route WARN and ERROR to the bus log.
    logLevel: logLevel.WARN,
    logCreator: () => (entry: LogEntry) => {
      const { message, ...fields } = entry.log;
      const data = { client: 'kafkajs', namespace: entry.namespace, ...fields };
      if (entry.level === logLevel.ERROR) resolved.log.error(data, message);
      else resolved.log.warn(data, message);
    },
  });
}

export function createKafkajsBus(options: KafkaBusOptions): KafkajsBus {
  const resolved = resolveKafkaBusOptions(options);
  const kafka = kafkajsClient(resolved);
  return {
    publisher: new KafkajsPublisher(kafka, resolved),
    subscriber: new KafkajsSubscriber(kafka, resolved),
    admin: new KafkajsTopicAdmin(kafka, resolved),
    transactions: new KafkajsTransactions(kafka, resolved),
  };
}

/** kafkajs's `ssl` (tls.connect options) and `sasl` (lower-case mechanism names). */
export function kafkajsSecurity({
  tls,
  sasl,
}: Pick<KafkaBusOptions, 'tls' | 'sasl'>): Pick<KafkaConfig, 'ssl' | 'sasl'> {
  const security: Pick<KafkaConfig, 'ssl' | 'sasl'> = {};
  if (tls !== undefined) security.ssl = { ...tls, rejectUnauthorized: true };
  if (sasl?.mechanism === 'oauthbearer') {
    const { token } = sasl;
    security.sasl = { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: await token() }) };
  } else if (sasl !== undefined) {
    const { mechanism, username, password } = sasl;
    security.sasl =
      mechanism === 'plain'
        ? { mechanism, username, password }
        : mechanism === 'scram-sha-256'
          ? { mechanism, username, password }
          : { mechanism, username, password };
  }
  return security;
}
