/**
 * The broker behind the in-memory bus (memory-bus.ts): topics and their
 * partition logs with retention, consumer groups with their members,
 * assignments and committed offsets, and the delivery loop of each assigned
 * partition (batches in offset order, redelivery after a rejection).
 */
import { randomUUID } from 'node:crypto';
import { CtxflowError } from '@ctxflow/contracts';
import type { CommittedOffset, IncomingRecord, OutgoingRecord, PartitionLog, SubscribeOptions } from './bus.ts';
import { partitionForKey } from './partition-for-key.ts';

export interface MemoryBusOptions {
  /** Partitions of a topic first seen by `publish` or `subscribe` rather than `ensureTopics`. Default 1. */
  defaultPartitions?: number;
  /** Most records handed to one `handle` call. Default 500. */
  maxBatchRecords?: number;
  /** Delay before redelivering after a handler rejection, in ms. Default 100. */
  retryBackoffMs?: number;
  /** Records kept per partition of a topic no consumer group reads. Default 10,000. */
  retainRecords?: number;
}

interface StoredRecord {
  key: string;
  value: string;
  headers: Record<string, string>;
}

/** A topic: its id (new at each creation) and its partitions. */
interface TopicLog {
  readonly id: string;
  readonly partitions: PartitionRecords[];
}

/** One partition's records from offset `base` on (what came before was dropped). */
interface PartitionRecords {
  base: number;
  readonly records: StoredRecord[];
}

/** Committed records are dropped once this many can go at once (or half the log): splice stays amortised. */
const TRIM_CHUNK = 256;

export interface Member {
  readonly options: SubscribeOptions;
  closing: boolean;
  /** Handler calls (and resumeFrom calls) in flight for this member. */
  readonly inFlight: Set<Promise<unknown>>;
}

/** The group's view of one partition: its owner, read position and committed offset. */
interface GroupPartition {
  readonly partition: number;
  owner: Member | undefined;
  /** The member whose `resumeFrom` set `position`; another owner resolves it again. */
  positionedFor: Member | undefined;
  /** Next offset to hand to the owner. */
  position: number;
  /** Next offset to read as committed by the group; undefined before the first commit. */
  committed: number | undefined;
  /** True while the delivery loop for this partition runs (one loop at a time). */
  running: boolean;
}

interface GroupTopic {
  readonly members: Member[];
  readonly partitions: GroupPartition[];
}

export class MemoryBroker {
  readonly #topics = new Map<string, TopicLog>();
  /** Keyed by `${groupId}\u0000${topic}`. */
  readonly #groups = new Map<string, GroupTopic>();
  readonly #defaultPartitions: number;
  readonly maxBatchRecords: number;
  readonly retryBackoffMs: number;
  readonly #retainRecords: number;

  constructor(options: MemoryBusOptions) {
    this.#defaultPartitions = options.defaultPartitions ?? 1;
    this.maxBatchRecords = options.maxBatchRecords ?? 500;
    this.retryBackoffMs = options.retryBackoffMs ?? 100;
    this.#retainRecords = options.retainRecords ?? 10_000;
  }

  ensureTopic(name: string, partitions: number): void {
    if (this.#topics.has(name)) return;
    this.#topics.set(name, {
      id: randomUUID(),
      partitions: Array.from({ length: partitions }, () => ({ base: 0, records: [] })),
    });
  }

  topic(name: string): PartitionRecords[] {
    return this.#topicLog(name).partitions;
  }

  topicId(name: string): string | undefined {
    return this.#topics.get(name)?.id;
  }

  #topicLog(name: string): TopicLog {
    this.ensureTopic(name, this.#defaultPartitions);
    const log = this.#topics.get(name);
    if (log === undefined) throw new Error(`topic ${name} missing after creation`);
    return log;
  }

  /** The partition's log as `resumeFrom` is told it. */
  describe(name: string, partition: number): PartitionLog {
    const topic = this.#topicLog(name);
    const log = topic.partitions[partition] ?? { base: 0, records: [] };
    return { topicId: topic.id, start: String(log.base), end: String(log.base + log.records.length) };
  }

  recreate(name: string): void {
    const count = this.#topics.get(name)?.partitions.length ?? this.#defaultPartitions;
    this.#topics.delete(name);
    this.ensureTopic(name, count);
    for (const group of this.#groupsOf(name)) {
      for (const state of group.partitions) {
        // Its delivery loop reads the new log; the owner is asked resumeFrom again first.
        state.positionedFor = undefined;
        state.position = 0;
        state.committed = undefined;
        this.#schedule(name, state);
      }
    }
  }

  /** Appends `records`, each to its key's partition, or all to `to` when given. */
  publish(topicName: string, records: OutgoingRecord[], to?: number): void {
    const logs = this.topic(topicName);
    const touched = new Set<number>();
    for (const record of records) {
      const partition = to ?? partitionForKey(record.key, logs.length);
      logs[partition]?.records.push({ key: record.key, value: record.value, headers: { ...(record.headers ?? {}) } });
      touched.add(partition);
    }
    const groups = this.#groupsOf(topicName);
    for (const group of groups) {
      for (const partition of touched) {
        const state = group.partitions[partition];
        if (state !== undefined) this.#schedule(topicName, state);
      }
    }
    if (groups.length === 0) {
      // Nobody reads it: keep the last retainRecords per partition.
      for (const partition of touched) {
        const log = logs[partition];
        if (log !== undefined) this.#drop(log, log.records.length - this.#retainRecords);
      }
    }
  }

  retained(topicName: string): number {
    let n = 0;
    for (const log of this.#topics.get(topicName)?.partitions ?? []) n += log.records.length;
    return n;
  }

  #groupsOf(topicName: string): GroupTopic[] {
    const groups: GroupTopic[] = [];
    for (const [groupKey, group] of this.#groups) if (groupKey.endsWith(`\u0000${topicName}`)) groups.push(group);
    return groups;
  }

  /** Drops what every group of the topic committed on `partition`. */
  #trim(topicName: string, partition: number): void {
    const log = this.topic(topicName)[partition];
    if (log === undefined) return;
    let committed = Number.POSITIVE_INFINITY;
    for (const group of this.#groupsOf(topicName)) {
      committed = Math.min(committed, group.partitions[partition]?.committed ?? 0);
    }
    this.#drop(log, committed - log.base);
  }

  /** Drops the first `n` records once that is a chunk's worth or half the log. */
  #drop(log: PartitionRecords, n: number): void {
    if (n <= 0 || (n < TRIM_CHUNK && n * 2 < log.records.length)) return;
    const count = Math.min(n, log.records.length);
    log.records.splice(0, count);
    log.base += count;
  }

  join(member: Member): void {
    const { topic, groupId } = member.options;
    const logs = this.topic(topic);
    const key = `${groupId}\u0000${topic}`;
    let group = this.#groups.get(key);
    if (group === undefined) {
      group = {
        members: [],
        partitions: logs.map((_, partition) => ({
          partition,
          owner: undefined,
          positionedFor: undefined,
          position: 0,
          committed: undefined,
          running: false,
        })),
      };
      this.#groups.set(key, group);
    }
    group.members.push(member);
    this.#rebalance(topic, group);
  }

  leave(member: Member): void {
    const { topic, groupId } = member.options;
    const group = this.#groups.get(`${groupId}\u0000${topic}`);
    if (group === undefined) return;
    const index = group.members.indexOf(member);
    if (index >= 0) group.members.splice(index, 1);
    this.#rebalance(topic, group);
  }

  /** Round-robin assignment over the members in join order (deterministic, like Kafka's assignors). */
  #rebalance(topic: string, group: GroupTopic): void {
    for (const state of group.partitions) {
      state.owner = group.members.length === 0 ? undefined : group.members[state.partition % group.members.length];
      this.#schedule(topic, state);
    }
  }

  /** Starts the partition's delivery loop on a later turn (never inside publish), unless it runs. */
  #schedule(topic: string, state: GroupPartition): void {
    if (state.running || state.owner === undefined) return;
    state.running = true;
    setImmediate(() => {
      void this.#deliver(topic, state);
    });
  }

  /**
   * The one delivery loop of a group partition. A rebalance never runs two
   * handlers for one partition: a new owner starts after the previous owner's
   * in-flight call settled, from the committed offset or its own resumeFrom.
   */
  async #deliver(topic: string, state: GroupPartition): Promise<void> {
    // Read again at each turn: a recreated topic has a new log.
    const logOf = () => this.topic(topic)[state.partition] ?? { base: 0, records: [] };
    const end = () => logOf().base + logOf().records.length;
    try {
      for (;;) {
        const log = logOf();
        const owner = state.owner;
        if (owner === undefined || owner.closing) return;
        if (state.positionedFor !== owner) {
          const resumed = await this.#track(
            owner,
            this.#resumeFrom(owner, topic, state.partition, this.describe(topic, state.partition), state.committed),
          );
          if (resumed === 'failed') {
            await sleep(this.retryBackoffMs);
            continue;
          }
          // Recreated meanwhile: ask again, with the new log.
          if (logOf() !== log) continue;
          // Records before the log's start were dropped: read from the oldest one kept.
          state.position = Math.max(resumed ?? state.committed ?? 0, logOf().base);
          state.positionedFor = owner;
          continue;
        }
        if (state.position < log.base) state.position = log.base;
        if (state.position >= end()) return;
        const first = state.position;
        const from = first - log.base;
        const batch: IncomingRecord[] = log.records.slice(from, from + this.maxBatchRecords).map((record, index) => ({
          topic,
          partition: state.partition,
          offset: String(first + index),
          key: record.key,
          value: record.value,
          headers: { ...record.headers },
          highWatermark: String(end()),
        }));
        const handled = await this.#track(
          owner,
          Promise.resolve().then(() => owner.options.handle(batch)),
        ).then(
          () => true,
          () => false,
        );
        if (logOf() !== log) continue; // recreated meanwhile: nothing of the old log is committed
        if (handled) {
          // Commit even when the owner changed meanwhile: the records were handled.
          if (state.position === first) state.position = first + batch.length;
          state.committed = Math.max(state.committed ?? 0, first + batch.length);
          this.#trim(topic, state.partition);
        } else {
          await sleep(this.retryBackoffMs);
        }
      }
    } finally {
      state.running = false;
      // An owner change or a publish that arrived while the loop was finishing.
      if (state.owner !== undefined && !state.owner.closing) {
        const pending = state.positionedFor !== state.owner || state.position < end();
        if (pending) this.#schedule(topic, state);
      }
    }
  }

  async #resumeFrom(
    owner: Member,
    topic: string,
    partition: number,
    log: PartitionLog,
    committedOffset: number | undefined,
  ): Promise<number | undefined | 'failed'> {
    const resumeFrom = owner.options.resumeFrom;
    if (resumeFrom === undefined) return undefined;
    try {
      // Commits of a log since recreated go with it: what is committed is this log's.
      const committed: CommittedOffset | undefined =
        committedOffset === undefined ? undefined : { offset: String(committedOffset) };
      if (committed !== undefined && log.topicId !== undefined) committed.topicId = log.topicId;
      const offset = await resumeFrom(topic, partition, log, committed);
      return offset === undefined ? undefined : parseOffset(offset);
    } catch {
      return 'failed';
    }
  }

  #track<T>(member: Member, work: Promise<T>): Promise<T> {
    member.inFlight.add(work);
    const done = () => {
      member.inFlight.delete(work);
    };
    work.then(done, done);
    return work;
  }
}

function parseOffset(offset: string): number {
  if (!/^\d+$/.test(offset)) throw new CtxflowError('internal_error', `resumeFrom returned a bad offset: ${offset}`);
  return Number(offset);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
