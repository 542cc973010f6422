import type { PartitionLog } from './bus.ts';

/** Kafka's "no topic id" (Uuid.ZERO_UUID), as @platformatic/kafka spells it. */
const ZERO_TOPIC_ID = '00000000-0000-0000-0000-000000000000';

/**
 * A topic id as @platformatic/kafka reports it in metadata, or undefined when
 * the broker gave none: before Metadata v10 the client puts the topic's name
 * in its place, and a broker may answer the zero UUID.
 */
export function reportedTopicId(topic: string, id: string | undefined): string | undefined {
  if (id === undefined || id === '' || id === topic || id === ZERO_TOPIC_ID) return undefined;
  return id;
}

/** How a commit's metadata names the topic id of the log it was read from. */
const TOPIC_ID_METADATA = 'ctxflow-topic-id:';

/** The commit metadata naming `topicId` (null: none known). */
export function topicIdMetadata(topicId: string | undefined): string | null {
  return topicId === undefined ? null : `${TOPIC_ID_METADATA}${topicId}`;
}

/** The topic id a commit's metadata names; undefined for metadata of another form or none. */
export function topicIdOfMetadata(metadata: string | null | undefined): string | undefined {
  if (typeof metadata !== 'string' || !metadata.startsWith(TOPIC_ID_METADATA)) return undefined;
  return metadata.slice(TOPIC_ID_METADATA.length) || undefined;
}

/**
 * What a consumer does with a partition whose stored or committed offset does
 * not fit its log (`CTXFLOW_OFFSET_RESET` of step-context and of the
 * session-runner):
 * - `earliest`: read the partition again from its first record (the consumer's
 *   dedupe drops what was already applied);
 * - `latest`: resume at the log's end: the records it holds now are skipped;
 * - `fail`: do not consume the partition until the offset is repaired
 *   (checked again at each retry of the assignment).
 */
export const OFFSET_RESET_POLICIES = ['earliest', 'latest', 'fail'] as const;
export type OffsetResetPolicy = (typeof OFFSET_RESET_POLICIES)[number];
export const DEFAULT_OFFSET_RESET: OffsetResetPolicy = 'earliest';

/**
 * Why an offset does not fit a partition's log:
 * - `topic_id`: it was read from another topic of this name (its id differs);
 * - `beyond_end`: the next offset to read is past the log's end;
 * - `below_start`: the next offset to read is below the log's start: retention
 *   deleted records that were never consumed.
 */
export type OffsetMismatch = 'topic_id' | 'beyond_end' | 'below_start';

/** How the error line of a mismatch says it. */
export const OFFSET_MISMATCH_DESCRIPTIONS: Readonly<Record<OffsetMismatch, string>> = {
  topic_id: 'it was read from another topic of this name',
  beyond_end: "it is past the log's end",
  below_start: 'retention deleted records it had not read',
};

/**
 * Why resuming at `next` (the next offset to read, taken from the log whose id
 * is `topicId`) does not fit `log`; undefined when it fits. The topic ids are
 * compared only when both are known (a broker before Kafka 2.8 reports none; a
 * commit of another client names none).
 */
export function offsetMismatch(
  next: bigint,
  topicId: string | undefined,
  log: PartitionLog,
): OffsetMismatch | undefined {
  if (topicId !== undefined && log.topicId !== undefined && topicId !== log.topicId) return 'topic_id';
  if (next > BigInt(log.end)) return 'beyond_end';
  if (next < BigInt(log.start)) return 'below_start';
  return undefined;
}

/**
 * Remembers the last mismatch told per partition, so a partition held by
 * `fail` and retried every few hundred ms is logged and counted once per state.
 */
export class MismatchReports {
  readonly #told = new Map<string, string>();

  /** True the first time `state` is seen for the partition (since it last fitted). */
  first(topic: string, partition: number, state: unknown): boolean {
    const key = `${topic}:${partition}`;
    const json = JSON.stringify(state);
    if (this.#told.get(key) === json) return false;
    this.#told.set(key, json);
    return true;
  }

  /** The partition fits its log again. */
  fitted(topic: string, partition: number): void {
    this.#told.delete(`${topic}:${partition}`);
  }
}
