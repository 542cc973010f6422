/**
 * The in-memory bus: the embedded default. It keeps Kafka's observable
 * contract in one process: topics with N partitions (a key always maps to the
 * partition Kafka would pick), offsets as decimal strings, consumer groups that
 * split partitions between their members and keep committed offsets,
 * `resumeFrom` on every assignment, redelivery after a handler rejection, and
 * asynchronous delivery. Records are kept for the life of the process (no
 * retention), nothing survives a restart.
 */
import { CtxflowError } from '@ctxflow/contracts';
import type {
  IncomingRecord,
  OutgoingRecord,
  Publisher,
  SubscribeOptions,
  Subscriber,
  Subscription,
  TopicAdmin,
} from './bus.ts';
import { partitionForKey } from './partition-for-key.ts';

export interface MemoryBusOptions {
  /** Partitions of a topic first seen by `publish` or `subscribe` rather than `ensureTopics`. Default 1. */
  defaultPartitions?: number;
  /** Most records handed to one `handle` call. Default 500. */
  maxBatchRecords?: number;
  /** Delay before redelivering after a handler rejection, in ms. Default 100. */
  retryBackoffMs?: number;
}

export interface MemoryBus {
  publisher: Publisher;
  subscriber: Subscriber;
  admin: TopicAdmin;
}

interface StoredRecord {
  key: string;
  value: string;
  headers: Record<string, string>;
}

interface Member {
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

class MemoryBroker {
  readonly #topics = new Map<string, StoredRecord[][]>();
  /** Keyed by `${groupId}\u0000${topic}`. */
  readonly #groups = new Map<string, GroupTopic>();
  readonly #defaultPartitions: number;
  readonly maxBatchRecords: number;
  readonly retryBackoffMs: number;

  constructor(options: MemoryBusOptions) {
    this.#defaultPartitions = options.defaultPartitions ?? 1;
    this.maxBatchRecords = options.maxBatchRecords ?? 500;
    this.retryBackoffMs = options.retryBackoffMs ?? 100;
  }

  ensureTopic(name: string, partitions: number): void {
    if (this.#topics.has(name)) return;
    this.#topics.set(
      name,
      Array.from({ length: partitions }, () => []),
    );
  }

  topic(name: string): StoredRecord[][] {
    this.ensureTopic(name, this.#defaultPartitions);
    const logs = this.#topics.get(name);
    if (logs === undefined) throw new Error(`topic ${name} missing after creation`);
    return logs;
  }

  publish(topicName: string, records: OutgoingRecord[]): void {
    const logs = this.topic(topicName);
    const touched = new Set<number>();
    for (const record of records) {
      const partition = partitionForKey(record.key, logs.length);
      logs[partition]?.push({ key: record.key, value: record.value, headers: { ...(record.headers ?? {}) } });
      touched.add(partition);
    }
    for (const [groupKey, group] of this.#groups) {
      if (!groupKey.endsWith(`\u0000${topicName}`)) continue;
      for (const partition of touched) {
        const state = group.partitions[partition];
        if (state !== undefined) this.#schedule(topicName, state);
      }
    }
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
    const log = this.topic(topic)[state.partition] ?? [];
    try {
      for (;;) {
        const owner = state.owner;
        if (owner === undefined || owner.closing) return;
        if (state.positionedFor !== owner) {
          const resumed = await this.#track(owner, this.#resumeFrom(owner, topic, state.partition));
          if (resumed === 'failed') {
            await sleep(this.retryBackoffMs);
            continue;
          }
          state.position = resumed ?? state.committed ?? 0;
          state.positionedFor = owner;
          continue;
        }
        if (state.position >= log.length) return;
        const first = state.position;
        const batch: IncomingRecord[] = log.slice(first, first + this.maxBatchRecords).map((record, index) => ({
          topic,
          partition: state.partition,
          offset: String(first + index),
          key: record.key,
          value: record.value,
          headers: { ...record.headers },
          highWatermark: String(log.length),
        }));
        const handled = await this.#track(
          owner,
          Promise.resolve().then(() => owner.options.handle(batch)),
        ).then(
          () => true,
          () => false,
        );
        if (handled) {
          // Commit even when the owner changed meanwhile: the records were handled.
          if (state.position === first) state.position = first + batch.length;
          state.committed = Math.max(state.committed ?? 0, first + batch.length);
        } else {
          await sleep(this.retryBackoffMs);
        }
      }
    } finally {
      state.running = false;
      // An owner change or a publish that arrived while the loop was finishing.
      if (state.owner !== undefined && !state.owner.closing) {
        const pending = state.positionedFor !== state.owner || state.position < log.length;
        if (pending) this.#schedule(topic, state);
      }
    }
  }

  async #resumeFrom(owner: Member, topic: string, partition: number): Promise<number | undefined | 'failed'> {
    const resumeFrom = owner.options.resumeFrom;
    if (resumeFrom === undefined) return undefined;
    try {
      const offset = await resumeFrom(topic, partition);
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

export function createMemoryBus(options: MemoryBusOptions = {}): MemoryBus {
  const broker = new MemoryBroker(options);

  const publisher: Publisher = {
    async publish(topic, records) {
      // Like a broker acknowledgement: resolved on a later turn, after the records are stored.
      await Promise.resolve();
      broker.publish(topic, records);
    },
    async close() {},
  };

  const subscriber: Subscriber = {
    async subscribe(subscribeOptions) {
      const member: Member = { options: subscribeOptions, closing: false, inFlight: new Set() };
      broker.join(member);
      let closed: Promise<void> | undefined;
      const subscription: Subscription = {
        async ready() {},
        close() {
          closed ??= (async () => {
            member.closing = true;
            broker.leave(member);
            while (member.inFlight.size > 0) await Promise.allSettled([...member.inFlight]);
          })();
          return closed;
        },
      };
      return subscription;
    },
  };

  const admin: TopicAdmin = {
    async ensureTopics(topics) {
      for (const { name, partitions } of topics) broker.ensureTopic(name, partitions);
    },
    async close() {},
  };

  return { publisher, subscriber, admin };
}
