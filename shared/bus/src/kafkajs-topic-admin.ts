/** `ensureTopics` on kafkajs's admin: creates what is missing and waits for each partition's leader. */

import type { Admin, Kafka } from 'kafkajs';
import type { TopicAdmin, TopicSpec } from './bus.ts';
import type { ResolvedKafkaBusOptions } from './kafka-options.ts';
import { busUnavailable, onlyTopicAlreadyExists } from './kafka-options.ts';

export class KafkajsTopicAdmin implements TopicAdmin {
  readonly #admin: Admin;
  readonly #options: ResolvedKafkaBusOptions;
  #connected = false;

  constructor(kafka: Kafka, options: ResolvedKafkaBusOptions) {
    this.#admin = kafka.admin();
    this.#options = options;
  }

  async ensureTopics(topics: TopicSpec[]): Promise<void> {
    try {
      if (!this.#connected) {
        await this.#admin.connect();
        this.#connected = true;
      }
      try {
        // Resolves false (no error) when every topic already exists.
        await this.#admin.createTopics({
          waitForLeaders: false,
          topics: topics.map((t) => ({
            topic: t.name,
            numPartitions: t.partitions,
            replicationFactor: this.#options.replicationFactor,
            configEntries: Object.entries(t.config ?? {}).map(([name, value]) => ({ name, value })),
          })),
        });
      } catch (err) {
        // A concurrent creator can win the race; that is success too.
        if (!onlyTopicAlreadyExists(err)) throw err;
      }
      await this.#waitForLeaders(topics.map((t) => t.name));
    } catch (err) {
      throw busUnavailable('ensureTopics failed', err);
    }
  }

  /**
   * Polls metadata until every partition has a leader. kafkajs's own
   * `waitForLeaders` retries only "leader not available", while a KRaft broker
   * answers "does not host this topic-partition" for a moment after creation.
   */
  async #waitForLeaders(names: string[]): Promise<void> {
    const deadline = Date.now() + this.#options.requestTimeoutMs;
    for (;;) {
      try {
        const { topics } = await this.#admin.fetchTopicMetadata({ topics: names });
        if (
          topics.length === names.length &&
          topics.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0))
        ) {
          return;
        }
      } catch (err) {
        if (Date.now() > deadline) throw err;
      }
      if (Date.now() > deadline) throw new Error(`topics ${names.join(', ')} have no leader yet`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async close(): Promise<void> {
    if (!this.#connected) return;
    this.#connected = false;
    await this.#admin.disconnect();
  }
}
