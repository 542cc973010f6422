/**
 * The topic id of the log a consumer group began reading each partition in,
 * kept beside the group's offsets by the consumer itself, for a client whose
 * commits cannot carry it (@platformatic/kafka commits no metadata:
 * docs/platformatic-kafka.md). CommittedOffsetGuard reads it at an assignment
 * and writes it, before the partition's first record is handled, when it
 * differs from the partition's current topic id: one read per assigned
 * partition, one write per partition and log, nothing per record.
 *
 * Adapters: adapters/memory-topic-id-record.ts (a runner without Redis; it
 * lasts as long as the process), adapters/redis-topic-id-record.ts.
 */
export interface TopicIdRecord {
  /** The topic id recorded for the group's partition; undefined when none is. */
  read(group: string, topic: string, partition: number): Promise<string | undefined>;
  /** Records `topicId` for the group's partition, replacing what was recorded. */
  write(group: string, topic: string, partition: number, topicId: string): Promise<void>;
}
