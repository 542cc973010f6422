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

export interface CommittedOffsetGuardDeps {
  policy?: OffsetResetPolicy;
  group: string;
  log?: { error(fields: object, message: string): void };
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
    const mismatch = checkCommittedOffset(committed, log);
    if (mismatch === undefined || committed === undefined) {
      this.#reports.fitted(topic, partition);
      return undefined;
    }
    const resumeAt = this.#policy === 'earliest' ? log.start : this.#policy === 'latest' ? log.end : undefined;
    if (this.#reports.first(topic, partition, [committed, log.topicId, mismatch])) {
      this.#deps.log?.error(
        {
          topic,
          partition,
          mismatch,
          committedOffset: committed.offset,
          committedTopicId: committed.topicId ?? null,
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
      throw new Error(
        `the committed offset of ${topic}:${partition} does not fit its log (${mismatch}); CTXFLOW_OFFSET_RESET=fail holds the partition`,
      );
    }
    return resumeAt;
  }
}
