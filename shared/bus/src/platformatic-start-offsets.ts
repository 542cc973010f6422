/**
 * Where the platformatic consumer starts each partition of an assignment:
 * `resumeFrom` (told each partition's log: topic id, log start and end, read
 * fresh from the broker), else the group's committed offset, else the log's
 * start. An offset below the log start reads from the start (retention
 * deleted what was below it).
 */

import type { Consumer } from '@platformatic/kafka';
import { ListOffsetTimestamps } from '@platformatic/kafka';
import type { PartitionLog, SubscribeOptions } from './bus.ts';
import { parseOffset } from './kafka-options.ts';
import { reportedTopicId } from './partition-log.ts';

export interface StartOffsets {
  /** The topic id the offsets belong to; undefined when the broker reports none. */
  topicId: string | undefined;
  /** The next offset to read, per partition. */
  offsets: Map<number, bigint>;
}

export async function startOffsets(
  consumer: Consumer<string, string, string, string>,
  topic: string,
  partitions: number[],
  resumeFrom: SubscribeOptions['resumeFrom'],
): Promise<StartOffsets> {
  const metadata = await consumer.metadata({ topics: [topic], forceUpdate: true });
  const topicId = reportedTopicId(topic, metadata.topics.get(topic)?.id);
  const earliest = (await consumer.listOffsets({ topics: [topic], timestamp: ListOffsetTimestamps.EARLIEST })).get(
    topic,
  );
  const latest = (await consumer.listOffsets({ topics: [topic], timestamp: ListOffsetTimestamps.LATEST })).get(topic);
  const committed = (await consumer.listCommittedOffsets({ topics: [{ topic, partitions }] })).get(topic);
  const fromSink = await Promise.all(
    partitions.map(async (p) => {
      if (resumeFrom === undefined) return undefined;
      const start = earliest?.[p] ?? 0n;
      const log: PartitionLog = { start: start.toString(), end: (latest?.[p] ?? start).toString() };
      if (topicId !== undefined) log.topicId = topicId;
      // The library commits no metadata: the offset is told without the topic id it was read in.
      const stored = committed?.[p];
      const offset = await resumeFrom(
        topic,
        p,
        log,
        stored !== undefined && stored >= 0n ? { offset: stored.toString() } : undefined,
      );
      return offset === undefined ? undefined : parseOffset(offset);
    }),
  );
  const offsets = new Map<number, bigint>();
  partitions.forEach((partition, i) => {
    const stored = committed?.[partition];
    const start = earliest?.[partition] ?? 0n;
    const next = fromSink[i] ?? (stored !== undefined && stored >= 0n ? stored : start);
    offsets.set(partition, next < start ? start : next);
  });
  return { topicId, offsets };
}
