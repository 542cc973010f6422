import type { TicketUpdate } from '@ctxflow/contracts';
import type {
  ApplyResult,
  ConsumedPosition,
  ConsumedRecord,
  FeedStreams,
  StoredPartition,
} from '../ports/feed-streams.ts';

/**
 * Consumed bus offsets as both adapters handle them: canonical decimal strings
 * (Kafka offsets exceed 2^53), compared without losing precision. The Redis scripts
 * compare them in redis/includes/offsets.lua.
 */

/** A StoredPartition of the fields that are there (null and undefined: absent). */
export function storedPartitionOf(offset?: string | null, topicId?: string | null): StoredPartition {
  const stored: StoredPartition = {};
  if (offset !== undefined && offset !== null) stored.offset = offset;
  if (topicId !== undefined && topicId !== null) stored.topicId = topicId;
  return stored;
}

/** Offsets as canonical decimal strings; compares without losing precision. */
export function compareOffsets(a: string, b: string): number {
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * The canonical offsets of a run for `applyRun`: one topic and partition,
 * strictly increasing; throws otherwise.
 */
export function checkRun(records: readonly ConsumedRecord[]): string[] {
  const offsets = records.map((r) => canonicalOffset(r.position.offset));
  const first = records[0]?.position;
  for (let i = 1; i < records.length; i++) {
    const { topic, partition } = records[i]!.position;
    if (topic !== first!.topic || partition !== first!.partition) {
      throw new Error(`a run spans ${first!.topic}:${first!.partition} and ${topic}:${partition}`);
    }
    if (compareOffsets(offsets[i]!, offsets[i - 1]!) <= 0) {
      throw new Error(`run offsets do not increase: ${offsets[i - 1]} then ${offsets[i]}`);
    }
  }
  return offsets;
}

export function canonicalOffset(offset: string): string {
  if (!/^\d+$/.test(offset)) throw new Error(`offset ${JSON.stringify(offset)} is not a decimal integer`);
  return BigInt(offset).toString();
}

/** `applyUpdate` as every adapter implements it: a run of one record. */
export async function applyOne(
  store: Pick<FeedStreams, 'applyRun'>,
  update: TicketUpdate,
  position: ConsumedPosition,
  trace: { traceparent?: string },
): Promise<ApplyResult> {
  const record: ConsumedRecord = { position, update };
  if (trace.traceparent) record.traceparent = trace.traceparent;
  return (await store.applyRun([record]))[0]!;
}
