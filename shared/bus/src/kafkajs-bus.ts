/**
 * The bus on Kafka through kafkajs 2.2. Producer: idempotent, acks=all, one
 * request in flight and one send at a time (publish calls made meanwhile go
 * out together in the next send), a fresh producer after a failed send.
 * Consumer: `eachBatch` per partition with manual offset resolution and
 * explicit commits after the handler resolved; `seek` on assignment when the
 * sink knows where to resume. kafkajs does not read topic ids (its Metadata
 * requests stop before v10): the partitions' logs that `resumeFrom` is told
 * come from a @platformatic/kafka Admin on the same brokers.
 */

import { ListOffsetTimestamps, Admin as LogAdmin } from '@platformatic/kafka';
import type {
  Admin,
  Batch,
  Consumer,
  EachBatchPayload,
  IHeaders,
  Kafka,
  KafkaConfig,
  LogEntry,
  Message,
  Producer,
  TopicMessages,
} from 'kafkajs';
import kafkajs from 'kafkajs';
import type {
  IncomingRecord,
  OutgoingRecord,
  PartitionLog,
  Publisher,
  SubscribeOptions,
  Subscriber,
  Subscription,
  TopicAdmin,
} from './bus.ts';
import type { KafkaBusOptions, ResolvedKafkaBusOptions } from './kafka-options.ts';
import { busUnavailable, onlyTopicAlreadyExists, parseOffset, pause, resolveKafkaBusOptions } from './kafka-options.ts';
import { reportedTopicId } from './partition-log.ts';
import { baseOptions } from './platformatic-bus.ts';

const { Kafka: KafkaClient, logLevel } = kafkajs;

export interface KafkajsBus {
  publisher: Publisher;
  subscriber: Subscriber;
  admin: TopicAdmin;
}

export function createKafkajsBus(options: KafkaBusOptions): KafkajsBus {
  const resolved = resolveKafkaBusOptions(options);
  const kafka = new KafkaClient({
    clientId: resolved.clientId,
    brokers: resolved.brokers,
    connectionTimeout: resolved.connectTimeoutMs,
    requestTimeout: resolved.requestTimeoutMs,
    retry: { retries: resolved.retries },
    ...kafkajsSecurity(resolved),
    // kafkajs logs through console by default; route WARN and ERROR to the bus log.
    logLevel: logLevel.WARN,
    logCreator: () => (entry: LogEntry) => {
      const { message, ...fields } = entry.log;
      const data = { client: 'kafkajs', namespace: entry.namespace, ...fields };
      if (entry.level === logLevel.ERROR) resolved.log.error(data, message);
      else resolved.log.warn(data, message);
    },
  });
  return {
    publisher: new KafkajsPublisher(kafka, resolved),
    subscriber: new KafkajsSubscriber(kafka, resolved),
    admin: new KafkajsTopicAdmin(kafka, resolved),
  };
}

/** kafkajs's `ssl` (tls.connect options) and `sasl` (lower-case mechanism names). */
export function kafkajsSecurity({
  tls,
  sasl,
}: Pick<KafkaBusOptions, 'tls' | 'sasl'>): Pick<KafkaConfig, 'ssl' | 'sasl'> {
  const security: Pick<KafkaConfig, 'ssl' | 'sasl'> = {};
  if (tls !== undefined) security.ssl = { ...tls, rejectUnauthorized: true };
  if (sasl?.mechanism === 'oauthbearer') {
    const { token } = sasl;
    security.sasl = { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: await token() }) };
  } else if (sasl !== undefined) {
    const { mechanism, username, password } = sasl;
    security.sasl =
      mechanism === 'plain'
        ? { mechanism, username, password }
        : mechanism === 'scram-sha-256'
          ? { mechanism, username, password }
          : { mechanism, username, password };
  }
  return security;
}

/**
 * Most characters (keys, values, header names and values) one coalesced send
 * carries: under the broker's 1 MiB record-batch limit even if it all goes to
 * one partition as 3-byte UTF-8. A single larger publish call goes alone.
 */
const COALESCE_MAX_CHARS = 256 * 1024;

/** A publish call waiting for its send. */
interface QueuedPublish {
  topic: string;
  records: OutgoingRecord[];
  chars: number;
  resolve(): void;
  reject(err: unknown): void;
}

/** One kafkajs producer (one producer id) and its connection. */
interface ProducerSession {
  producer: Producer;
  connected: Promise<void>;
}

/**
 * One send at a time per publisher. kafkajs takes a partition's sequence
 * number when it builds a produce and gives it back when the produce fails,
 * even if the broker appended it (its answer lost): a second send in flight
 * to that partition would then take the number again and be acknowledged as
 * a duplicate of the appended batch without being written. So publish calls
 * made while a send is in flight queue up and go out together in the next
 * one (one `sendBatch`), each settled with that send's outcome. A send that
 * fails leaves the producer's sequence numbers unreliable: the producer is
 * disconnected and the next send gets a fresh one (a new producer id), so a
 * record of the failed send may be written again, never acknowledged unwritten.
 */
export class KafkajsPublisher implements Publisher {
  readonly #kafka: Pick<Kafka, 'producer'>;
  readonly #retries: number;
  readonly #queue: QueuedPublish[] = [];
  #session: ProducerSession | undefined;
  #draining = false;
  #drained: Promise<void> = Promise.resolve();
  readonly #retiring = new Set<Promise<void>>();

  constructor(kafka: Pick<Kafka, 'producer'>, options: Pick<ResolvedKafkaBusOptions, 'retries'>) {
    this.#kafka = kafka;
    this.#retries = options.retries;
  }

  publish(topic: string, records: OutgoingRecord[]): Promise<void> {
    if (records.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.#queue.push({ topic, records, chars: charsOf(records), resolve, reject });
      if (!this.#draining) {
        this.#draining = true;
        this.#drained = this.#drain();
      }
    });
  }

  /** Sends until the queue is empty; never rejects. */
  async #drain(): Promise<void> {
    try {
      while (this.#queue.length > 0) await this.#sendNext();
    } finally {
      // Cleared in the same turn as the last empty check: a publish after it starts a new drain.
      this.#draining = false;
    }
  }

  async #sendNext(): Promise<void> {
    let session: ProducerSession | undefined;
    let failure: { err: unknown } | undefined;
    try {
      session = this.#currentSession();
      await session.connected;
    } catch (err) {
      failure = { err };
    }
    // Taken once connected: calls made while connecting go out in this send too.
    const batch = this.#takeBatch();
    if (failure === undefined && session !== undefined) {
      try {
        await session.producer.sendBatch({ acks: -1, topicMessages: topicMessagesOf(batch) });
      } catch (err) {
        failure = { err };
      }
    }
    if (failure === undefined) {
      for (const queued of batch) queued.resolve();
      return;
    }
    if (session !== undefined) this.#retire(session);
    for (const queued of batch) queued.reject(busUnavailable(`publish to ${queued.topic} failed`, failure.err));
  }

  /** The queue's head, and after it whole calls while they fit in COALESCE_MAX_CHARS. */
  #takeBatch(): QueuedPublish[] {
    let chars = 0;
    let count = 0;
    for (const queued of this.#queue) {
      if (count > 0 && chars + queued.chars > COALESCE_MAX_CHARS) break;
      chars += queued.chars;
      count++;
    }
    return this.#queue.splice(0, count);
  }

  #currentSession(): ProducerSession {
    if (this.#session !== undefined) return this.#session;
    const producer = this.#kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      // Bounded, so a dead broker ends in bus_unavailable; callers dedupe by record id.
      retry: { retries: this.#retries },
    });
    const session: ProducerSession = { producer, connected: producer.connect() };
    // Observed here so a failed connect is never an unhandled rejection; #sendNext reads it too.
    session.connected.catch(() => undefined);
    this.#session = session;
    return session;
  }

  /** Disconnects a producer in the background; the next send creates a fresh one. */
  #retire(session: ProducerSession): void {
    if (this.#session === session) this.#session = undefined;
    const done: Promise<void> = session.connected
      .catch(() => undefined)
      .then(() => session.producer.disconnect())
      .catch(() => undefined)
      .finally(() => this.#retiring.delete(done));
    this.#retiring.add(done);
  }

  /** Waits for the calls already made to settle, then disconnects; a later publish connects again. */
  async close(): Promise<void> {
    while (this.#draining) await this.#drained;
    const session = this.#session;
    this.#session = undefined;
    if (session !== undefined) {
      this.#retiring.add(
        session.connected.then(
          () => session.producer.disconnect(),
          () => undefined,
        ),
      );
    }
    await Promise.all(this.#retiring);
  }
}

function charsOf(records: OutgoingRecord[]): number {
  let chars = 0;
  for (const r of records) {
    chars += r.key.length + r.value.length;
    for (const [name, value] of Object.entries(r.headers ?? {})) chars += name.length + value.length;
  }
  return chars;
}

/**
 * One entry per topic, records in call order. kafkajs keeps only the last
 * entry of a topic that appears twice in `topicMessages`.
 */
function topicMessagesOf(batch: QueuedPublish[]): TopicMessages[] {
  const byTopic = new Map<string, Message[]>();
  for (const { topic, records } of batch) {
    let messages = byTopic.get(topic);
    if (messages === undefined) {
      messages = [];
      byTopic.set(topic, messages);
    }
    for (const r of records) messages.push({ key: r.key, value: r.value, headers: { ...(r.headers ?? {}) } });
  }
  return [...byTopic].map(([topic, messages]) => ({ topic, messages }));
}

class KafkajsTopicAdmin implements TopicAdmin {
  readonly #admin: Admin;
  readonly #options: ResolvedKafkaBusOptions;
  #connected = false;

  constructor(kafka: Kafka, options: ResolvedKafkaBusOptions) {
    this.#admin = kafka.admin();
    this.#options = options;
  }

  async ensureTopics(topics: { name: string; partitions: number }[]): Promise<void> {
    try {
      if (!this.#connected) {
        await this.#admin.connect();
        this.#connected = true;
      }
      try {
        // Resolves false (no error) when every topic already exists.
        await this.#admin.createTopics({
          waitForLeaders: false,
          topics: topics.map((t) => ({
            topic: t.name,
            numPartitions: t.partitions,
            replicationFactor: this.#options.replicationFactor,
          })),
        });
      } catch (err) {
        // A concurrent creator can win the race; that is success too.
        if (!onlyTopicAlreadyExists(err)) throw err;
      }
      await this.#waitForLeaders(topics.map((t) => t.name));
    } catch (err) {
      throw busUnavailable('ensureTopics failed', err);
    }
  }

  /**
   * Polls metadata until every partition has a leader. kafkajs's own
   * `waitForLeaders` retries only "leader not available", while a KRaft broker
   * answers "does not host this topic-partition" for a moment after creation.
   */
  async #waitForLeaders(names: string[]): Promise<void> {
    const deadline = Date.now() + this.#options.requestTimeoutMs;
    for (;;) {
      try {
        const { topics } = await this.#admin.fetchTopicMetadata({ topics: names });
        if (
          topics.length === names.length &&
          topics.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0))
        ) {
          return;
        }
      } catch (err) {
        if (Date.now() > deadline) throw err;
      }
      if (Date.now() > deadline) throw new Error(`topics ${names.join(', ')} have no leader yet`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async close(): Promise<void> {
    if (!this.#connected) return;
    this.#connected = false;
    await this.#admin.disconnect();
  }
}

class KafkajsSubscriber implements Subscriber {
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
type Gate = { state: 'pending' } | { state: 'open'; seekTo: bigint | undefined; next?: bigint };

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
  #logs: { generation: number; logs: Promise<Map<number, PartitionLog>> } | undefined;

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
        const offset =
          resumeFrom === undefined
            ? undefined
            : await resumeFrom(topic, partition, await this.#logOf(partition, generation));
        if (generation !== this.#generation) return;
        if (offset === undefined) {
          this.#gates.set(partition, { state: 'open', seekTo: undefined });
        } else {
          const seekTo = parseOffset(offset);
          this.#consumer.seek({ topic, partition, offset });
          this.#gates.set(partition, { state: 'open', seekTo });
        }
        return;
      } catch (err) {
        this.#logs = undefined; // described again at the retry
        this.#options.log.warn({ client: 'kafkajs', topic, partition, err }, 'resumeFrom failed; retrying');
        await pause(this.#options.retryBackoffMs, this.#stopping.signal);
      }
    }
  }

  /** A partition's log (topic id, start, end) as the brokers describe it now; one description per generation. */
  async #logOf(partition: number, generation: number): Promise<PartitionLog> {
    if (this.#logs?.generation !== generation) {
      const logs = this.#describeLogs();
      logs.catch(() => undefined);
      this.#logs = { generation, logs };
    }
    const log = (await this.#logs.logs).get(partition);
    if (log === undefined) throw new Error(`no offsets for ${this.#subscribe.topic}:${partition}`);
    return log;
  }

  async #describeLogs(): Promise<Map<number, PartitionLog>> {
    const { topic } = this.#subscribe;
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
    const logs = new Map<number, PartitionLog>();
    for (const p of partitions) {
      const start = earliest.get(p);
      if (start === undefined) continue;
      const log: PartitionLog = { start: start.toString(), end: (latest.get(p) ?? start).toString() };
      if (topicId !== undefined) log.topicId = topicId;
      logs.set(p, log);
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
      this.#gates.set(partition, { state: 'open', seekTo: undefined });
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
    await commitOffsetsIfNecessary({
      topics: [{ topic: batch.topic, partitions: [{ partition, offset: (BigInt(last) + 1n).toString() }] }],
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
