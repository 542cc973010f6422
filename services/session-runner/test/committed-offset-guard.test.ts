/**
 * The step-request consumer's check of the group's committed offset at each
 * assignment (committed-offset-guard.ts): what fits resumes where the group
 * committed; another topic id, past the end or below the start is one error
 * line, one count and the policy; a commit that names no topic id is taken to
 * be of the log its topic id record names. On the real broker:
 * test/faults/step-requests-recreated.test.ts.
 */
import type { CommittedOffset, OffsetResetPolicy, PartitionLog } from '@ctxflow/bus';
import { describe, expect, it } from 'vitest';
import { MemoryTopicIdRecord } from '../src/adapters/memory-topic-id-record.ts';
import { CommittedOffsetGuard, checkCommittedOffset } from '../src/committed-offset-guard.ts';
import type { TopicIdRecord } from '../src/ports/topic-id-record.ts';

const ID = 'a6f1c2de-0000-4000-8000-000000000001';
const OTHER = 'a6f1c2de-0000-4000-8000-000000000002';
const log: PartitionLog = { topicId: ID, start: '2', end: '10' };

describe('checkCommittedOffset: the committed offset against the log', () => {
  it.each<[string, CommittedOffset | undefined, PartitionLog, string | undefined]>([
    ['none committed', undefined, log, undefined],
    ['within the log, same topic id', { offset: '5', topicId: ID }, log, undefined],
    ['at the log end', { offset: '10', topicId: ID }, log, undefined],
    ['at the log start, no topic id committed', { offset: '2' }, log, undefined],
    ['no topic id reported by the broker', { offset: '5', topicId: OTHER }, { start: '2', end: '10' }, undefined],
    ['another topic id', { offset: '5', topicId: OTHER }, log, 'topic_id'],
    ['past the end', { offset: '11', topicId: ID }, log, 'beyond_end'],
    ['past the end, no topic id committed', { offset: '11' }, log, 'beyond_end'],
    ['below the start', { offset: '1', topicId: ID }, log, 'below_start'],
    ['past 2^53', { offset: '9007199254740993' }, { start: '0', end: '9007199254740992' }, 'beyond_end'],
  ])('%s', (_name, committed, partitionLog, expected) => {
    expect(checkCommittedOffset(committed, partitionLog)).toBe(expected);
  });
});

describe('CommittedOffsetGuard', () => {
  function rig(policy?: OffsetResetPolicy, topicIds?: TopicIdRecord) {
    const lines: { fields: Record<string, unknown>; message: string }[] = [];
    const counts: object[] = [];
    const guard = new CommittedOffsetGuard({
      group: 'runners',
      ...(policy === undefined ? {} : { policy }),
      ...(topicIds === undefined ? {} : { topicIds }),
      log: { error: (fields, message) => lines.push({ fields: fields as Record<string, unknown>, message }) },
      mismatched: (e) => counts.push(e),
    });
    return { guard, lines, counts };
  }

  it('a committed offset that fits: the group offset (undefined), nothing said', async () => {
    const { guard, lines, counts } = rig();
    expect(await guard.resumeFrom('steps', 3, log, { offset: '5', topicId: ID })).toBeUndefined();
    expect(await guard.resumeFrom('steps', 4, log, undefined)).toBeUndefined();
    expect(lines).toEqual([]);
    expect(counts).toEqual([]);
  });

  it('another topic id, by default: the log start, one error line with both offsets, one count', async () => {
    const { guard, lines, counts } = rig();
    expect(await guard.resumeFrom('steps', 3, log, { offset: '5', topicId: OTHER })).toBe('2');
    expect(lines).toEqual([
      {
        fields: {
          topic: 'steps',
          partition: 3,
          mismatch: 'topic_id',
          committedOffset: '5',
          committedTopicId: OTHER,
          committedTopicIdFrom: 'commit',
          topicId: ID,
          logStart: '2',
          logEnd: '10',
          reset: 'earliest',
          resumeAt: '2',
        },
        message:
          "committed step-request offset does not fit the partition's log (it was read from another topic of this name): resuming at 2 (earliest)",
      },
    ]);
    expect(counts).toEqual([
      { group: 'runners', topic: 'steps', partition: 3, mismatch: 'topic_id', reset: 'earliest' },
    ]);
  });

  it('latest: past the end resumes at the log end', async () => {
    const { guard, lines, counts } = rig('latest');
    expect(await guard.resumeFrom('steps', 0, log, { offset: '1000' })).toBe('10');
    expect(lines.map((l) => [l.fields.mismatch, l.fields.committedTopicId, l.fields.resumeAt])).toEqual([
      ['beyond_end', null, '10'],
    ]);
    expect(counts).toHaveLength(1);
  });

  it('fail: the partition is held (a rejection the bus retries), said and counted once however often it is asked', async () => {
    const { guard, lines, counts } = rig('fail');
    for (let i = 0; i < 3; i++) {
      await expect(guard.resumeFrom('steps', 1, log, { offset: '1', topicId: ID })).rejects.toThrow(
        'the committed offset of steps:1 does not fit its log (below_start); CTXFLOW_OFFSET_RESET=fail holds the partition',
      );
    }
    expect(lines).toHaveLength(1);
    expect(lines[0]!.message).toBe(
      "committed step-request offset does not fit the partition's log (retention deleted records it had not read): partition held (CTXFLOW_OFFSET_RESET=fail)",
    );
    expect(counts).toHaveLength(1);
    // Repaired (an operator reset the group's offset): it resumes, and a later mismatch is said again.
    expect(await guard.resumeFrom('steps', 1, log, { offset: '4', topicId: ID })).toBeUndefined();
    await expect(guard.resumeFrom('steps', 1, log, { offset: '1', topicId: ID })).rejects.toThrow();
    expect(lines).toHaveLength(2);
  });

  describe('with a topic id record (commits that name no topic id)', () => {
    /** A memory record that also lists its writes. */
    function record() {
      const inner = new MemoryTopicIdRecord();
      const writes: [string, string, number, string][] = [];
      const topicIds: TopicIdRecord = {
        read: (group, topic, partition) => inner.read(group, topic, partition),
        write: async (group, topic, partition, topicId) => {
          writes.push([group, topic, partition, topicId]);
          await inner.write(group, topic, partition, topicId);
        },
      };
      return { topicIds, writes };
    }

    it('a partition begun in another log: its commit is of that log, a topic_id mismatch; then the log is recorded', async () => {
      const { topicIds, writes } = record();
      await topicIds.write('runners', 'steps', 3, OTHER);
      const { guard, lines, counts } = rig(undefined, topicIds);
      expect(await guard.resumeFrom('steps', 3, log, { offset: '5' })).toBe('2');
      expect(lines.map((l) => [l.fields.mismatch, l.fields.committedTopicId, l.fields.committedTopicIdFrom])).toEqual([
        ['topic_id', OTHER, 'record'],
      ]);
      expect(counts).toHaveLength(1);
      expect(await topicIds.read('runners', 'steps', 3)).toBe(ID);
      // Assigned again in the same log: it fits, nothing more said or written.
      expect(await guard.resumeFrom('steps', 3, log, { offset: '6' })).toBeUndefined();
      expect(lines).toHaveLength(1);
      expect(writes).toEqual([
        ['runners', 'steps', 3, OTHER],
        ['runners', 'steps', 3, ID],
      ]);
    });

    it('nothing recorded (a new group, or the first assignment with a record): what the commit says, and the log recorded', async () => {
      const { topicIds, writes } = record();
      const { guard, lines } = rig(undefined, topicIds);
      expect(await guard.resumeFrom('steps', 0, log, { offset: '5' })).toBeUndefined();
      expect(await guard.resumeFrom('steps', 1, log, undefined)).toBeUndefined();
      expect(lines).toEqual([]);
      expect(writes).toEqual([
        ['runners', 'steps', 0, ID],
        ['runners', 'steps', 1, ID],
      ]);
    });

    it("the commit's own topic id comes before the record", async () => {
      const { topicIds } = record();
      await topicIds.write('runners', 'steps', 2, OTHER);
      const { guard, lines } = rig(undefined, topicIds);
      expect(await guard.resumeFrom('steps', 2, log, { offset: '5', topicId: ID })).toBeUndefined();
      expect(lines).toEqual([]);
      await topicIds.write('runners', 'steps', 2, ID);
      expect(await guard.resumeFrom('steps', 2, log, { offset: '5', topicId: OTHER })).toBe('2');
      expect(lines.map((l) => l.fields.committedTopicIdFrom)).toEqual(['commit']);
    });

    it('fail: a held partition is not recorded as begun in the log, so every retry holds it', async () => {
      const { topicIds } = record();
      await topicIds.write('runners', 'steps', 1, OTHER);
      const { guard, lines, counts } = rig('fail', topicIds);
      for (let i = 0; i < 2; i++) {
        await expect(guard.resumeFrom('steps', 1, log, { offset: '5' })).rejects.toThrow(
          'the committed offset of steps:1 does not fit its log (topic_id); CTXFLOW_OFFSET_RESET=fail holds the partition',
        );
      }
      expect(await topicIds.read('runners', 'steps', 1)).toBe(OTHER);
      expect(lines).toHaveLength(1);
      expect(counts).toHaveLength(1);
    });

    it('a broker that reports no topic id: the record is neither read nor written', async () => {
      const reads: number[] = [];
      const { topicIds, writes } = record();
      const counting: TopicIdRecord = {
        read: async (group, topic, partition) => {
          reads.push(partition);
          return topicIds.read(group, topic, partition);
        },
        write: topicIds.write,
      };
      const { guard } = rig(undefined, counting);
      expect(await guard.resumeFrom('steps', 0, { start: '0', end: '10' }, { offset: '5' })).toBeUndefined();
      expect(reads).toEqual([]);
      expect(writes).toEqual([]);
    });

    it('a record that cannot be written: the assignment rejects (the bus retries it), said once', async () => {
      const { topicIds } = record();
      await topicIds.write('runners', 'steps', 4, OTHER);
      const failing: TopicIdRecord = {
        read: topicIds.read,
        write: async () => {
          throw new Error('redis down');
        },
      };
      const { guard, lines } = rig(undefined, failing);
      await expect(guard.resumeFrom('steps', 4, log, { offset: '5' })).rejects.toThrow('redis down');
      await expect(guard.resumeFrom('steps', 4, log, { offset: '5' })).rejects.toThrow('redis down');
      expect(lines).toHaveLength(1);
    });
  });
});
