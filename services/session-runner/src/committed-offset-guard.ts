import {
  type CommittedOffset,
  DEFAULT_OFFSET_RESET,
  MismatchReports,
  OFFSET_MISMATCH_DESCRIPTIONS,
  type OffsetMismatch,
  type OffsetResetPolicy,
  offsetMismatch,
  type PartitionLog,
} from '@ctxflow/bus';
import type { TopicIdRecord } from './ports/topic-id-record.ts';

/*
 * The step-request consumer keeps no offsets of its own: it resumes from the
 * group's committed offset. That offset is a position in one log, the topic as
 * Kafka identifies it by its id. Kafka drops a group's offsets with a deleted
 * topic, but a member still reading the old log can commit its position into
 * the topic created again under the name, and offsets copied from another
 * cluster or reset by hand can lie past the log's end: resumed from, each skips
 * the requests below it (or the client's auto offset reset moves it without a
 * word). So at every assignment the committed offset is checked against the
 * partition's log, and what does not fit is reset by a policy.
 *
 * Which log a committed offset was read in: on kafkajs each commit names its
 * topic id in its metadata. @platformatic/kafka 2.12 commits `null` metadata
 * on every commit (its Consumer, its stream and its Admin's
 * alterConsumerGroupOffsets alike); only its protocol-level OffsetCommit API
 * takes metadata, and committing through it would mean doing the library's
 * commit (coordinator, generation or member epoch, rejoin and retry, the
 * stream's queued commits) outside it. So the guard keeps a topic id record
 * (ports/topic-id-record.ts) beside the offsets: per group and partition, the
 * topic id of the log the group began reading the partition in, written here
 * before the partition's first record is handled. A commit that names no
 * topic id is taken to be of the recorded log. Per partition, not per topic:
 * a member still reading the old log commits the partitions it holds while
 * other members already began theirs in the new log. What the record cannot
 * tell: a commit from the old log made after the group began the partition in
 * the new log (docs/operations.md#offsets-that-do-not-fit-their-log).
 */

/**
 * Why the committed offset does not fit the partition's log, or undefined when
 * it fits or there is none. The topic ids are compared only when both are known
 * (a commit of another client names none; a broker before Kafka 2.8 reports none).
 */
export function checkCommittedOffset(
  committed: CommittedOffset | undefined,
  log: PartitionLog,
): OffsetMismatch | undefined {
  if (committed === undefined) return undefined;
  return offsetMismatch(BigInt(committed.offset), committed.topicId, log);
}

/** Where the topic id a committed offset is taken to be of came from. */
type TopicIdSource = 'commit' | 'record' | null;

export interface CommittedOffsetGuardDeps {
  policy?: OffsetResetPolicy;
  group: string;
  log?: { error(fields: object, message: string): void };
  /**
   * The topic id each partition of the group was begun in, for commits that name none
   * (@platformatic/kafka's). Default: none (such a commit is checked against the log's range only).
   */
  topicIds?: TopicIdRecord;
  /** Counts one mismatch (`ctxflow.consumer.offset_mismatches`). */
  mismatched?(e: { group: string; topic: string; partition: number; mismatch: string; reset: string }): void;
}

/**
 * `resumeFrom` of the step-request subscription: undefined (the committed
 * offset, or the earliest without one) when the committed offset fits the
 * partition's log; otherwise an error line with the partition and both
 * offsets, a count in the offset-mismatch metric, and the policy: the log's
 * start (`earliest`, the default: a step request already answered is answered
 * again with its step, by its request id), its end (`latest`), or a rejection
 * that holds the partition (`fail`; the bus asks again after a backoff).
 */
export class CommittedOffsetGuard {
  readonly #deps: CommittedOffsetGuardDeps;
  readonly #policy: OffsetResetPolicy;
  readonly #reports = new MismatchReports();

  constructor(deps: CommittedOffsetGuardDeps) {
    this.#deps = deps;
    this.#policy = deps.policy ?? DEFAULT_OFFSET_RESET;
  }

  async resumeFrom(
    topic: string,
    partition: number,
    log: PartitionLog,
    committed: CommittedOffset | undefined,
  ): Promise<string | undefined> {
    const { group, topicIds } = this.#deps;
    const recorded =
      topicIds === undefined || log.topicId === undefined ? undefined : await topicIds.read(group, topic, partition);
    // The commit's own topic id first; else the recorded one.
    const source: TopicIdSource =
      committed?.topicId !== undefined ? 'commit' : recorded !== undefined ? 'record' : null;
    const offset = committed === undefined || source !== 'record' ? committed : { ...committed, topicId: recorded };
    const mismatch = checkCommittedOffset(offset, log);
    // The partition is read in this log from here on: recorded before its first record is handled.
    const begin = async () => {
      if (topicIds !== undefined && log.topicId !== undefined && recorded !== log.topicId) {
        await topicIds.write(group, topic, partition, log.topicId);
      }
    };
    if (mismatch === undefined || offset === undefined) {
      await begin();
      this.#reports.fitted(topic, partition);
      return undefined;
    }
    const resumeAt = this.#policy === 'earliest' ? log.start : this.#policy === 'latest' ? log.end : undefined;
    if (this.#reports.first(topic, partition, [offset, log.topicId, mismatch])) {
      this.#deps.log?.error(
        {
          topic,
          partition,
          mismatch,
          committedOffset: offset.offset,
          committedTopicId: offset.topicId ?? null,
          committedTopicIdFrom: source,
          topicId: log.topicId ?? null,
          logStart: log.start,
          logEnd: log.end,
          reset: this.#policy,
          resumeAt: resumeAt ?? null,
        },
        `committed step-request offset does not fit the partition's log (${OFFSET_MISMATCH_DESCRIPTIONS[mismatch]}): ${
          resumeAt === undefined
            ? 'partition held (CTXFLOW_OFFSET_RESET=fail)'
            : `resuming at ${resumeAt} (${this.#policy})`
        }`,
      );
      this.#deps.mismatched?.({ group: this.#deps.group, topic, partition, mismatch, reset: this.#policy });
    }
    if (resumeAt === undefined) {
      // Not begun in this log: recorded, the next retry would take the commit for one of it.
      throw new Error(
        `the committed offset of ${topic}:${partition} does not fit its log (${mismatch}); CTXFLOW_OFFSET_RESET=fail holds the partition`,
      );
    }
    await begin();
    return resumeAt;
  }
}
