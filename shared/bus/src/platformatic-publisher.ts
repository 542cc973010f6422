/** The bus's publisher on @platformatic/kafka: idempotent, acks=all, the Java client's key partitioning. */

import { compatibilityPartitioner, ProduceAcks, Producer, stringSerializers } from '@platformatic/kafka';
import type { OutgoingRecord, Publisher } from './bus.ts';
import type { ResolvedKafkaBusOptions } from './kafka-options.ts';
import { busUnavailable } from './kafka-options.ts';
import { baseOptions } from './platformatic-options.ts';

export class PlatformaticPublisher implements Publisher {
  readonly #producer: Producer<string, string, string, string>;

  constructor(options: ResolvedKafkaBusOptions) {
    this.#producer = new Producer({
      ...baseOptions(options),
      idempotent: true,
      acks: ProduceAcks.ALL,
      autocreateTopics: false,
      // murmur2(key) & 0x7fffffff: where kafkajs and the Java client put a key.
      partitioner: compatibilityPartitioner,
      serializers: stringSerializers,
    });
  }

  async publish(topic: string, records: OutgoingRecord[]): Promise<void> {
    if (records.length === 0) return;
    try {
      await this.#producer.send({
        messages: records.map((r) => ({ topic, key: r.key, value: r.value, headers: { ...(r.headers ?? {}) } })),
      });
    } catch (err) {
      throw busUnavailable(`publish to ${topic} failed`, err);
    }
  }

  async close(): Promise<void> {
    await this.#producer.close();
  }
}
