import type { Cluster, Redis } from 'ioredis';
import type { TopicIdRecord } from '../ports/topic-id-record.ts';
import { topicIdRecordKey } from './redis/keys.ts';

/**
 * The topic id record on Redis (ports/topic-id-record.ts): one hash per group
 * and topic (keys.ts topicIdRecordKey), partition -> topic id. It expires
 * with nothing: a group's offsets in Kafka do not either.
 */
export class RedisTopicIdRecord implements TopicIdRecord {
  readonly #client: Redis | Cluster;
  readonly #prefix: string;

  /** `prefix`: the session store's (CTXFLOW_REDIS_PREFIX; default `ctx`). */
  constructor(client: Redis | Cluster, prefix = 'ctx') {
    this.#client = client;
    this.#prefix = prefix;
    topicIdRecordKey(prefix, 'group', 'topic'); // a bad prefix is refused here, not at an assignment
  }

  async read(group: string, topic: string, partition: number): Promise<string | undefined> {
    return (await this.#client.hget(topicIdRecordKey(this.#prefix, group, topic), String(partition))) ?? undefined;
  }

  async write(group: string, topic: string, partition: number, topicId: string): Promise<void> {
    await this.#client.hset(topicIdRecordKey(this.#prefix, group, topic), String(partition), topicId);
  }
}
