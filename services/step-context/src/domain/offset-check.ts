import {
  DEFAULT_OFFSET_RESET,
  OFFSET_MISMATCH_DESCRIPTIONS as DESCRIPTIONS,
  MismatchReports,
  OFFSET_RESET_POLICIES,
  type OffsetMismatch,
  type OffsetResetPolicy,
  offsetMismatch,
  type PartitionLog,
} from '@ctxflow/bus';
import type { FeedStreams, StoredPartition } from '../ports/feed-streams.ts';

/*
 * The consumed offsets step-context keeps beside its output (ports/feed-streams.ts)
 * are positions in one log: a topic, as Kafka identifies it by its topic id. A
 * topic deleted and created again under the same name is another log whose
 * offsets start over at 0, and a Redis restored from another copy can hold
 * offsets of a log that is no more. Resuming from such an offset skips every
 * record below it (the feed stream store refuses them as consumed) without a trace.
 * So at every assignment the stored offset is checked against the partition's
 * log as the broker describes it, and what does not fit is reset by a policy.
 */

export { DEFAULT_OFFSET_RESET, OFFSET_RESET_POLICIES, type OffsetMismatch, type OffsetResetPolicy };

export type OffsetCheck =
  /** Resume at `next` (undefined: the bus's default); `bind`: record this topic id with the stored offset. */
  { verdict: 'resume'; next: string | undefined; bind?: string } | { verdict: 'mismatch'; mismatch: OffsetMismatch };

/**
 * The stored state of a partition against its log. A topic id is compared
 * only when both are known (a broker before Kafka 2.8 reports none). A
 * partition with a bound topic id but no offset (bound at an assignment,
 * nothing consumed since, or reset) starts at the log's start, another log's
 * id only rebound: there is nothing it could skip. With nothing stored the
 * bus's default applies.
 */
export function checkStoredOffset(stored: StoredPartition, log: PartitionLog): OffsetCheck {
  const otherLog = stored.topicId !== undefined && log.topicId !== undefined && stored.topicId !== log.topicId;
  let next: string | undefined;
  if (stored.offset !== undefined) {
    const after = BigInt(stored.offset) + 1n;
    const mismatch = offsetMismatch(after, stored.topicId, log);
    if (mismatch !== undefined) return { verdict: 'mismatch', mismatch };
    next = after.toString();
  } else if (stored.topicId !== undefined) {
    next = log.start;
  }
  const bind = stored.topicId === undefined || otherLog ? log.topicId : undefined;
  return bind === undefined ? { verdict: 'resume', next } : { verdict: 'resume', next, bind };
}

/**
 * Where a reset by `policy` resumes (`next`) and what it stores: the last
 * consumed offset (`offset`, undefined for none) under the log's topic id.
 */
export function resetTarget(
  policy: Exclude<OffsetResetPolicy, 'fail'>,
  stored: StoredPartition,
  log: PartitionLog,
): { next: string; stored: StoredPartition } {
  const topicId = log.topicId ?? stored.topicId;
  const end = BigInt(log.end);
  const offset = policy === 'latest' && end > BigInt(log.start) ? (end - 1n).toString() : undefined;
  const next: StoredPartition = {};
  if (offset !== undefined) next.offset = offset;
  if (topicId !== undefined) next.topicId = topicId;
  return { next: policy === 'latest' ? log.end : log.start, stored: next };
}

export interface OffsetGuardDeps {
  feedStreams: Pick<FeedStreams, 'storedPartition' | 'rebindPartition'>;
  policy: OffsetResetPolicy;
  group: string;
  log: { error(fields: object, message: string): void };
  mismatched?(e: { group: string; topic: string; partition: number; mismatch: string; reset: string }): void;
}

/** Tries of a check-and-write that another write keeps overtaking, before the assignment is retried. */
const MAX_TRIES = 5;

/**
 * `resumeFrom` of step-context's subscription: the stored offset when it fits
 * the partition's log (binding the log's topic id to it the first time),
 * otherwise an error line, a count in the offset-mismatch metric, and the
 * policy. Each write is conditional on what was read (rebindPartition), so a
 * concurrent write makes it check again.
 */
export class OffsetGuard {
  readonly #deps: OffsetGuardDeps;
  readonly #reports = new MismatchReports();

  constructor(deps: OffsetGuardDeps) {
    this.#deps = deps;
  }

  async resumeFrom(topic: string, partition: number, log: PartitionLog): Promise<string | undefined> {
    const { feedStreams, policy } = this.#deps;
    for (let tries = 0; tries < MAX_TRIES; tries++) {
      const stored = await feedStreams.storedPartition(topic, partition);
      const check = checkStoredOffset(stored, log);
      if (check.verdict === 'resume') {
        if (check.bind !== undefined) {
          const bound = await feedStreams.rebindPartition(topic, partition, stored, { ...stored, topicId: check.bind });
          if (!bound) continue;
        }
        this.#reports.fitted(topic, partition);
        return check.next;
      }
      const target = policy === 'fail' ? undefined : resetTarget(policy, stored, log);
      this.#report(topic, partition, stored, log, check.mismatch, target?.next);
      if (target === undefined) {
        throw new Error(
          `the stored offset of ${topic}:${partition} does not fit its log (${check.mismatch}); CTXFLOW_OFFSET_RESET=fail holds the partition`,
        );
      }
      if (await feedStreams.rebindPartition(topic, partition, stored, target.stored)) return target.next;
    }
    throw new Error(`the stored offset of ${topic}:${partition} kept changing while it was checked`);
  }

  #report(
    topic: string,
    partition: number,
    stored: StoredPartition,
    log: PartitionLog,
    mismatch: OffsetMismatch,
    resumeAt: string | undefined,
  ): void {
    const { policy, group } = this.#deps;
    if (!this.#reports.first(topic, partition, [stored, log.topicId, mismatch])) return;
    this.#deps.log.error(
      {
        topic,
        partition,
        mismatch,
        storedOffset: stored.offset ?? null,
        storedTopicId: stored.topicId ?? null,
        topicId: log.topicId ?? null,
        logStart: log.start,
        logEnd: log.end,
        reset: policy,
        resumeAt: resumeAt ?? null,
      },
      `stored offset does not fit the partition's log (${DESCRIPTIONS[mismatch]}): ${
        resumeAt === undefined ? 'partition held (CTXFLOW_OFFSET_RESET=fail)' : `resuming at ${resumeAt} (${policy})`
      }`,
    );
    this.#deps.mismatched?.({ group, topic, partition, mismatch, reset: policy });
  }
}
