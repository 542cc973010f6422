/**
 * The bus's consumer on kafkajs 2.2: `eachBatch` per partition with manual
 * offset resolution and explicit commits after the handler resolved; `seek`
 * on assignment when the sink knows where to resume. kafkajs does not read
 * topic ids (its Metadata requests stop before v10): the partitions' logs that
 * `resumeFrom` is told come from a @platformatic/kafka Admin on the same brokers.
 */

import { ListOffsetTimestamps, Admin as LogAdmin } from '@platformatic/kafka';
import type { Batch, Consumer, EachBatchPayload, IHeaders, Kafka } from 'kafkajs';
import type {
  CommittedOffset,
  IncomingRecord,
  PartitionLog,
  SubscribeOptions,
  Subscriber,
  Subscription,
} from './bus.ts';
import type { ResolvedKafkaBusOptions } from './kafka-options.ts';
import { busUnavailable, parseOffset, pause } from './kafka-options.ts';
import { reportedTopicId, topicIdMetadata, topicIdOfMetadata } from './partition-log.ts';
import { baseOptions } from './platformatic-options.ts';

export class KafkajsSubscriber implements Subscriber {
  readonly #kafka: Kafka;
  readonly #options: ResolvedKafkaBusOptions;

  constructor(kafka: Kafka, options: ResolvedKafkaBusOptions) {
    this.#kafka = kafka;
    this.#options = options;
  }

  async subscribe(options: SubscribeOptions): Promise<Subscription> {
    const subscription = new KafkajsSubscription(this.#kafka, this.#options, options);
    await subscription.start();
    return subscription;
  }
}

/**
 * Per assigned partition, whether records may reach the handler yet:
 * `pending` until resumeFrom answered; then `open`, with `seekTo` while a seek
 * to the sink's offset has not yet been honoured by a fetch, and `next` once a
 * batch was handled: the offset after it. A fetch that starts below `next`
 * means kafkajs moved the position back by itself (the offset was out of
 * range, as after the topic was created again: it resets to the earliest),
 * and the sink is asked where to resume again.
 */
type Gate = { state: 'pending' } | { state: 'open'; seekTo: bigint | undefined; next?: bigint; topicId?: string };

/** A partition's log and the group's committed offset in it, as resumeFrom is told them. */
interface DescribedPartition {
  log: PartitionLog;
  committed: CommittedOffset | undefined;
}

class KafkajsSubscription implements Subscription {
  readonly #consumer: Consumer;
  readonly #options: ResolvedKafkaBusOptions;
  readonly #subscribe: SubscribeOptions;
  readonly #gates = new Map<number, Gate>();
  readonly #stopping = new AbortController();
  #generation = 0;
  #joined!: () => void;
  readonly #ready = new Promise<void>((resolve) => {
    this.#joined = resolve;
  });
  #closed: Promise<void> | undefined;
  /** Describes the partitions' logs for resumeFrom; made on the first assignment. */
  #logAdmin: LogAdmin | undefined;
  /** The logs of the assignment in place, described once per generation. */
  #logs: { generation: number; logs: Promise<Map<number, DescribedPartition>> } | undefined;

  constructor(kafka: Kafka, options: ResolvedKafkaBusOptions, subscribe: SubscribeOptions) {
    this.#options = options;
    this.#subscribe = subscribe;
    this.#consumer = kafka.consumer({
      groupId: subscribe.groupId,
      sessionTimeout: options.sessionTimeoutMs,
      heartbeatInterval: options.heartbeatIntervalMs,
      rebalanceTimeout: options.rebalanceTimeoutMs,
      maxWaitTimeInMs: options.maxWaitMs,
      allowAutoTopicCreation: false,
      retry: { retries: options.retries },
    });
    // Emitted synchronously after each join and sync, before the first fetch of
    // the new generation: gates close here, so no record slips past a seek.
    this.#consumer.on(this.#consumer.events.GROUP_JOIN, (event) => {
      const assigned = event.payload.memberAssignment[subscribe.topic] ?? [];
      const generation = ++this.#generation;
      this.#gates.clear();
      for (const partition of assigned) {
        this.#gates.set(partition, { state: 'pending' });
        void this.#resume(partition, generation);
      }
      this.#joined();
    });
    this.#consumer.on(this.#consumer.events.CRASH, (event) => {
      options.log.error(
        { client: 'kafkajs', topic: subscribe.topic, groupId: subscribe.groupId, err: event.payload.error },
        'consumer crashed',
      );
    });
  }

  async start(): Promise<void> {
    try {
      await this.#consumer.connect();
      // fromBeginning: a group without a committed offset starts at the earliest record.
      await this.#consumer.subscribe({ topic: this.#subscribe.topic, fromBeginning: true });
      await this.#consumer.run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        eachBatch: (payload) => this.#eachBatch(payload),
      });
    } catch (err) {
      await this.#consumer.disconnect().catch(() => undefined);
      throw busUnavailable(`subscribe to ${this.#subscribe.topic} failed`, err);
    }
  }

  ready(): Promise<void> {
    return this.#ready;
  }

  close(): Promise<void> {
    // disconnect() stops fetching, waits for the batch in progress (its handler
    // and commit), then leaves the group.
    this.#closed ??= (async () => {
      this.#stopping.abort();
      await this.#consumer.disconnect();
      await this.#logAdmin?.close().catch(() => undefined);
    })();
    return this.#closed;
  }

  /** Asks the sink where to resume, retrying until it answers or the generation is over. */
  async #resume(partition: number, generation: number): Promise<void> {
    const { topic, resumeFrom } = this.#subscribe;
    for (;;) {
      if (generation !== this.#generation || this.#stopping.signal.aborted) return;
      try {
        const described = await this.#logOf(partition, generation);
        const offset =
          resumeFrom === undefined ? undefined : await resumeFrom(topic, partition, described.log, described.committed);
        if (generation !== this.#generation) return;
        // The commits of what is read from here on name the log it is read from.
        const topicId = described.log.topicId === undefined ? {} : { topicId: described.log.topicId };
        if (offset === undefined) {
          this.#gates.set(partition, { state: 'open', seekTo: undefined, ...topicId });
        } else {
          const seekTo = parseOffset(offset);
          this.#consumer.seek({ topic, partition, offset });
          this.#gates.set(partition, { state: 'open', seekTo, ...topicId });
        }
        return;
      } catch (err) {
        this.#logs = undefined; // described again at the retry
        this.#options.log.warn({ client: 'kafkajs', topic, partition, err }, 'resumeFrom failed; retrying');
        await pause(this.#options.retryBackoffMs, this.#stopping.signal);
      }
    }
  }

  /**
   * A partition's log (topic id, start, end) as the brokers describe it now, and the group's
   * committed offset with the topic id its commit named; one description per generation.
   */
  async #logOf(partition: number, generation: number): Promise<DescribedPartition> {
    if (this.#logs?.generation !== generation) {
      const logs = this.#describeLogs();
      logs.catch(() => undefined);
      this.#logs = { generation, logs };
    }
    const log = (await this.#logs.logs).get(partition);
    if (log === undefined) throw new Error(`no offsets for ${this.#subscribe.topic}:${partition}`);
    return log;
  }

  async #describeLogs(): Promise<Map<number, DescribedPartition>> {
    const { topic, groupId } = this.#subscribe;
    this.#logAdmin ??= new LogAdmin(baseOptions(this.#options));
    const admin = this.#logAdmin;
    const metadata = await admin.metadata({ topics: [topic], forceUpdate: true });
    const described = metadata.topics.get(topic);
    if (described === undefined) throw new Error(`no metadata for ${topic}`);
    const topicId = reportedTopicId(topic, described.id);
    const partitions = Array.from({ length: described.partitionsCount }, (_, p) => p);
    const offsetsAt = async (timestamp: bigint) => {
      const [listed] = await admin.listOffsets({
        topics: [{ name: topic, partitions: partitions.map((partitionIndex) => ({ partitionIndex, timestamp })) }],
      });
      return new Map((listed?.partitions ?? []).map((p) => [p.partitionIndex, p.offset]));
    };
    const [earliest, latest] = [
      await offsetsAt(ListOffsetTimestamps.EARLIEST),
      await offsetsAt(ListOffsetTimestamps.LATEST),
    ];
    const [group] = await admin.listConsumerGroupOffsets({
      groups: [{ groupId, topics: [{ name: topic, partitionIndexes: partitions }] }],
    });
    const committed = new Map(
      (group?.topics.find((t) => t.name === topic)?.partitions ?? []).map((p) => [p.partitionIndex, p]),
    );
    const logs = new Map<number, DescribedPartition>();
    for (const p of partitions) {
      const start = earliest.get(p);
      if (start === undefined) continue;
      const log: PartitionLog = { start: start.toString(), end: (latest.get(p) ?? start).toString() };
      if (topicId !== undefined) log.topicId = topicId;
      const stored = committed.get(p);
      let offset: CommittedOffset | undefined;
      if (stored !== undefined && stored.committedOffset >= 0n) {
        offset = { offset: stored.committedOffset.toString() };
        const committedTopicId = topicIdOfMetadata(stored.metadata);
        if (committedTopicId !== undefined) offset.topicId = committedTopicId;
      }
      logs.set(p, { log, committed: offset });
    }
    return logs;
  }

  async #eachBatch({ batch, resolveOffset, heartbeat, commitOffsetsIfNecessary, isStale }: EachBatchPayload) {
    const { partition } = batch;
    const gate = this.#gates.get(partition);
    if (gate === undefined || gate.state === 'pending') {
      // Not resolved: the next fetch reads the same offsets again. Wait a little for resumeFrom.
      await pause(20, this.#stopping.signal);
      return;
    }
    if (isStale() || this.#stopping.signal.aborted) return;
    const head = batch.messages[0];
    if (gate.seekTo === undefined && gate.next !== undefined && head !== undefined && BigInt(head.offset) < gate.next) {
      this.#options.log.warn(
        { client: 'kafkajs', topic: batch.topic, partition, offset: head.offset, expected: gate.next.toString() },
        'the fetch position went back (the offset was out of range); asking where to resume again',
      );
      this.#gates.set(partition, { state: 'pending' });
      this.#logs = undefined; // described anew: the log is not what the assignment found
      void this.#resume(partition, this.#generation);
      return;
    }
    let messages = batch.messages;
    if (gate.seekTo !== undefined) {
      const seekTo = gate.seekTo;
      const first = messages[0];
      if (first !== undefined && BigInt(first.offset) < seekTo) {
        // Fetched from before the seek (it raced the assignment): seek again, never deliver.
        this.#consumer.seek({ topic: batch.topic, partition, offset: seekTo.toString() });
        return;
      }
      this.#gates.set(partition, { ...gate, seekTo: undefined });
      messages = messages.filter((m) => BigInt(m.offset) >= seekTo);
    }
    if (messages.length === 0) return;
    const records = messages.map((m) => toIncoming(batch, m));
    try {
      await this.#subscribe.handle(records);
    } catch (err) {
      this.#options.log.warn(
        { client: 'kafkajs', topic: batch.topic, partition, offset: records[0]?.offset, err },
        'handler rejected; redelivering',
      );
      // Nothing resolved, nothing committed: the next fetch starts at the failed record.
      await pause(this.#options.retryBackoffMs, this.#stopping.signal);
      await heartbeat().catch(() => undefined);
      return;
    }
    const last = records[records.length - 1]?.offset ?? batch.lastOffset();
    const current = this.#gates.get(partition);
    if (current?.state === 'open') current.next = BigInt(last) + 1n;
    resolveOffset(last);
    const metadata = topicIdMetadata(current?.state === 'open' ? current.topicId : undefined);
    await commitOffsetsIfNecessary({
      topics: [
        {
          topic: batch.topic,
          partitions: [{ partition, offset: (BigInt(last) + 1n).toString(), ...(metadata ? { metadata } : {}) }],
        },
      ],
    });
    await heartbeat();
  }
}

function toIncoming(batch: Batch, message: Batch['messages'][number]): IncomingRecord {
  return {
    topic: batch.topic,
    partition: batch.partition,
    offset: message.offset,
    key: message.key?.toString('utf8') ?? '',
    value: message.value?.toString('utf8') ?? '',
    headers: decodeHeaders(message.headers),
    highWatermark: batch.highWatermark,
  };
}

function decodeHeaders(headers: IHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (value === undefined) continue;
    // A repeated header arrives as a list; the port has one value per name: the last wins.
    const last = Array.isArray(value) ? value[value.length - 1] : value;
    out[name] = last === undefined ? '' : last.toString();
  }
  return out;
}
