import { compatibilityPartitioner } from '@platformatic/kafka';

/**
 * The partition of a key: `(murmur2(utf8(key)) & 0x7fffffff) % partitions`, the
 * formula of Kafka's Java client default partitioner, by @platformatic/kafka's
 * compatibilityPartitioner (the platformatic bus produces with it; kafkajs'
 * DefaultPartitioner agrees), so the in-memory bus places a key where Kafka does.
 */
export function partitionForKey(key: string, partitions: number): number {
  return compatibilityPartitioner({ topic: '' }, Buffer.from(key, 'utf8')) % partitions;
}
