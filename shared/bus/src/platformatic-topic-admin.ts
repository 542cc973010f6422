/** `ensureTopics` on @platformatic/kafka's Admin: creates what is missing and waits for each partition's leader. */

import { Admin } from '@platformatic/kafka';
import type { TopicAdmin, TopicSpec } from './bus.ts';
import type { ResolvedKafkaBusOptions } from './kafka-options.ts';
import { busUnavailable, onlyTopicAlreadyExists, pause } from './kafka-options.ts';
import { baseOptions } from './platformatic-options.ts';

export class PlatformaticTopicAdmin implements TopicAdmin {
  readonly #admin: Admin;
  readonly #options: ResolvedKafkaBusOptions;

  constructor(options: ResolvedKafkaBusOptions) {
    this.#options = options;
    this.#admin = new Admin(baseOptions(options));
  }

  async ensureTopics(topics: TopicSpec[]): Promise<void> {
    try {
      const existing = new Set(await this.#admin.listTopics());
      const missing = topics.filter((t) => !existing.has(t.name));
      for (const topic of missing) {
        try {
          await this.#admin.createTopics({
            topics: [topic.name],
            partitions: topic.partitions,
            replicas: this.#options.replicationFactor,
            configs: Object.entries(topic.config ?? {}).map(([name, value]) => ({ name, value })),
          });
        } catch (err) {
          // A concurrent creator can win the race; that is success too (decided by the error code: a
          // topic just created elsewhere may not be listed yet).
          if (!onlyTopicAlreadyExists(err)) throw err;
        }
      }
      if (missing.length > 0) await this.#waitForLeaders(missing.map((t) => t.name));
    } catch (err) {
      throw busUnavailable('ensureTopics failed', err);
    }
  }

  /**
   * A new topic answers produce and fetch only once each partition has a leader.
   * A topic another client has just created may be unknown to the broker that
   * answers metadata for a moment: that is retried until the deadline too.
   */
  async #waitForLeaders(names: string[]): Promise<void> {
    const deadline = Date.now() + this.#options.requestTimeoutMs;
    for (;;) {
      let ready = false;
      try {
        const metadata = await this.#admin.metadata({ topics: names, forceUpdate: true });
        ready = names.every((name) => {
          const topic = metadata.topics.get(name);
          return topic !== undefined && topic.partitions.length > 0 && topic.partitions.every((p) => p.leader >= 0);
        });
      } catch (err) {
        if (Date.now() > deadline) throw err;
      }
      if (ready) return;
      if (Date.now() > deadline) throw new Error(`no leader for ${names.join(', ')}`);
      await pause(100);
    }
  }

  async close(): Promise<void> {
    await this.#admin.close();
  }
}
