import type { TopicIdRecord } from '../ports/topic-id-record.ts';

/** The topic id record in this process (ports/topic-id-record.ts): gone with it. */
export class MemoryTopicIdRecord implements TopicIdRecord {
  readonly #ids = new Map<string, string>();

  async read(group: string, topic: string, partition: number): Promise<string | undefined> {
    return this.#ids.get(JSON.stringify([group, topic, partition]));
  }

  async write(group: string, topic: string, partition: number, topicId: string): Promise<void> {
    this.#ids.set(JSON.stringify([group, topic, partition]), topicId);
  }
}
