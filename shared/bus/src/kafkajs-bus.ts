/**
 * The bus on Kafka through kafkajs 2.2. Producer: idempotent, acks=all, one
 * request in flight. Consumer: `eachBatch` per partition with manual offset
 * resolution and explicit commits after the handler resolved; `seek` on
 * assignment when the sink knows where to resume.
 */

import type { Admin, Batch, Consumer, EachBatchPayload, IHeaders, Kafka, LogEntry, Producer } from 'kafkajs';
import kafkajs from 'kafkajs';
import type {
  IncomingRecord,
  OutgoingRecord,
  Publisher,
  SubscribeOptions,
  Subscriber,
  Subscription,
  TopicAdmin,
} from './bus.ts';
import type { KafkaBusOptions, ResolvedKafkaBusOptions } from './kafka-options.ts';
import { busUnavailable, parseOffset, pause, resolveKafkaBusOptions } from './kafka-options.ts';

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

class KafkajsPublisher implements Publisher {
  readonly #producer: Producer;
  #connected: Promise<void> | undefined;

  constructor(kafka: Kafka, options: ResolvedKafkaBusOptions) {
    this.#producer = kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      // Bounded, so a dead broker ends in bus_unavailable; callers dedupe by record id.
      retry: { retries: options.retries },
    });
  }

  async publish(topic: string, records: OutgoingRecord[]): Promise<void> {
    if (records.length === 0) return;
    try {
      await this.#connect();
      await this.#producer.send({
        topic,
        acks: -1,
        messages: records.map((r) => ({ key: r.key, value: r.value, headers: { ...(r.headers ?? {}) } })),
      });
    } catch (err) {
      throw busUnavailable(`publish to ${topic} failed`, err);
    }
  }

  #connect(): Promise<void> {
    this.#connected ??= this.#producer.connect().catch((err: unknown) => {
      this.#connected = undefined;
      throw err;
    });
    return this.#connected;
  }

  async close(): Promise<void> {
    const connected = this.#connected;
    this.#connected = undefined;
    if (connected === undefined) return;
    await connected.catch(() => undefined);
    await this.#producer.disconnect();
  }
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
        const errors = (err as { errors?: { type?: string }[] }).errors;
        if (!(Array.isArray(errors) && errors.length > 0 && errors.every((e) => e.type === 'TOPIC_ALREADY_EXISTS'))) {
          throw err;
        }
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
 * to the sink's offset has not yet been honoured by a fetch.
 */
type Gate = { state: 'pending' } | { state: 'open'; seekTo: bigint | undefined };

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
    })();
    return this.#closed;
  }

  /** Asks the sink where to resume, retrying until it answers or the generation is over. */
  async #resume(partition: number, generation: number): Promise<void> {
    const { topic, resumeFrom } = this.#subscribe;
    for (;;) {
      if (generation !== this.#generation || this.#stopping.signal.aborted) return;
      try {
        const offset = resumeFrom === undefined ? undefined : await resumeFrom(topic, partition);
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
        this.#options.log.warn({ client: 'kafkajs', topic, partition, err }, 'resumeFrom failed; retrying');
        await pause(this.#options.retryBackoffMs, this.#stopping.signal);
      }
    }
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
