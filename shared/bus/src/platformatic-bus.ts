/**
 * The bus on Kafka through @platformatic/kafka 2. Producer: idempotent,
 * acks=all, the Java client's key partitioning. Consumer: the library's group
 * membership (join, sync, heartbeats, rejoin on rebalance) with this adapter's
 * own fetch loop over `Consumer.fetch`, because the library's message stream
 * prefetches ahead of the handler and keeps its own positions: here a
 * partition's position moves only after the handler resolved, a rejection
 * fetches the same records again, and an assignment seeks to `resumeFrom`
 * before anything of that partition is fetched.
 */

import { isIP } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import type { RecordsBatch, SASLOptions } from '@platformatic/kafka';
import {
  Admin,
  Consumer,
  compatibilityPartitioner,
  IS_CONTROL,
  ListOffsetTimestamps,
  ProduceAcks,
  Producer,
  stringSerializers,
} from '@platformatic/kafka';
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

/** Most bytes one fetch returns per partition (Kafka's own default, 1 MiB). */
const PARTITION_MAX_BYTES = 1_048_576;
const FETCH_MAX_BYTES = 52_428_800;

type FetchResponse = Awaited<ReturnType<Consumer['fetch']>>;

export interface PlatformaticBus {
  publisher: Publisher;
  subscriber: Subscriber;
  admin: TopicAdmin;
}

export function createPlatformaticBus(options: KafkaBusOptions): PlatformaticBus {
  const resolved = resolveKafkaBusOptions(options);
  return {
    publisher: new PlatformaticPublisher(resolved),
    subscriber: { subscribe: (subscribe) => PlatformaticSubscription.start(resolved, subscribe) },
    admin: new PlatformaticTopicAdmin(resolved),
  };
}

/** The client options every client of this adapter (and the kafkajs adapter's log describer) starts from. */
export function baseOptions(options: ResolvedKafkaBusOptions) {
  return {
    clientId: options.clientId,
    bootstrapBrokers: options.brokers,
    connectTimeout: options.connectTimeoutMs,
    timeout: options.requestTimeoutMs,
    retries: options.retries,
    ...platformaticSecurity(options),
  };
}

/**
 * The client's `tls` (tls.connect options), `tlsServerName` and `sasl`
 * (upper-case mechanism names). SNI carries the broker's host name (hosted
 * clusters route on it); an IP address is never sent as a server name (RFC 6066).
 */
function platformaticSecurity({ tls, sasl, brokers }: ResolvedKafkaBusOptions) {
  const security: { tls?: ConnectionOptions; tlsServerName?: boolean; sasl?: SASLOptions } = {};
  if (tls !== undefined) {
    security.tls = { ...tls, rejectUnauthorized: true };
    const host = brokers[0]?.slice(0, brokers[0].lastIndexOf(':')) ?? '';
    if (isIP(host) === 0) security.tlsServerName = true;
  }
  if (sasl?.mechanism === 'oauthbearer') {
    security.sasl = { mechanism: 'OAUTHBEARER', token: sasl.token };
  } else if (sasl !== undefined) {
    const mechanism =
      sasl.mechanism === 'plain' ? 'PLAIN' : sasl.mechanism === 'scram-sha-256' ? 'SCRAM-SHA-256' : 'SCRAM-SHA-512';
    security.sasl = { mechanism, username: sasl.username, password: sasl.password };
  }
  return security;
}

class PlatformaticPublisher implements Publisher {
  readonly #producer: Producer<string, string, string, string>;

  constructor(options: ResolvedKafkaBusOptions) {
    this.#producer = new Producer({
      ...baseOptions(options),
      idempotent: true,
      acks: ProduceAcks.ALL,
      autocreateTopics: false,
      // murmur2(key) & 0x7fffffff: where kafkajs and the Java client put a key.
      partitioner: compatibilityPartitioner,
      serializers: stringSerializers,
    });
  }

  async publish(topic: string, records: OutgoingRecord[]): Promise<void> {
    if (records.length === 0) return;
    try {
      await this.#producer.send({
        messages: records.map((r) => ({ topic, key: r.key, value: r.value, headers: { ...(r.headers ?? {}) } })),
      });
    } catch (err) {
      throw busUnavailable(`publish to ${topic} failed`, err);
    }
  }

  async close(): Promise<void> {
    await this.#producer.close();
  }
}

class PlatformaticTopicAdmin implements TopicAdmin {
  readonly #admin: Admin;
  readonly #options: ResolvedKafkaBusOptions;

  constructor(options: ResolvedKafkaBusOptions) {
    this.#options = options;
    this.#admin = new Admin(baseOptions(options));
  }

  async ensureTopics(topics: { name: string; partitions: number }[]): Promise<void> {
    try {
      const existing = new Set(await this.#admin.listTopics());
      const missing = topics.filter((t) => !existing.has(t.name));
      for (const topic of missing) {
        try {
          await this.#admin.createTopics({
            topics: [topic.name],
            partitions: topic.partitions,
            replicas: this.#options.replicationFactor,
          });
        } catch (err) {
          // A concurrent creator can win the race; that is success too (decided by the error code: a
          // topic just created elsewhere may not be listed yet).
          if (!onlyTopicAlreadyExists(err)) throw err;
        }
      }
      if (missing.length > 0) await this.#waitForLeaders(missing.map((t) => t.name));
    } catch (err) {
      throw busUnavailable('ensureTopics failed', err);
    }
  }

  /**
   * A new topic answers produce and fetch only once each partition has a leader.
   * A topic another client has just created may be unknown to the broker that
   * answers metadata for a moment: that is retried until the deadline too.
   */
  async #waitForLeaders(names: string[]): Promise<void> {
    const deadline = Date.now() + this.#options.requestTimeoutMs;
    for (;;) {
      let ready = false;
      try {
        const metadata = await this.#admin.metadata({ topics: names, forceUpdate: true });
        ready = names.every((name) => {
          const topic = metadata.topics.get(name);
          return topic !== undefined && topic.partitions.length > 0 && topic.partitions.every((p) => p.leader >= 0);
        });
      } catch (err) {
        if (Date.now() > deadline) throw err;
      }
      if (ready) return;
      if (Date.now() > deadline) throw new Error(`no leader for ${names.join(', ')}`);
      await pause(100);
    }
  }

  async close(): Promise<void> {
    await this.#admin.close();
  }
}

/**
 * The position of one assigned partition: `pending` until the start offset is
 * known (resumeFrom, else the committed offset, else the earliest), then `open`
 * with the next offset to fetch.
 */
type Position = { state: 'pending' } | { state: 'open'; next: bigint };

class PlatformaticSubscription implements Subscription {
  readonly #consumer: Consumer;
  readonly #options: ResolvedKafkaBusOptions;
  readonly #subscribe: SubscribeOptions;
  readonly #positions = new Map<number, Position>();
  readonly #stopping = new AbortController();
  #generation = 0;
  #joined!: () => void;
  readonly #ready = new Promise<void>((resolve) => {
    this.#joined = resolve;
  });
  #loop: Promise<void> = Promise.resolve();
  #closed: Promise<void> | undefined;
  /** The Kafka generation and partitions of the assignment in place; undefined once a rebalance began. */
  #assigned: string | undefined;
  /** The topic id the positions in place were resolved against; undefined when the broker reports none. */
  #topicId: string | undefined;
  /** Per partition, the offset after its last handled records, not committed yet, with their generation. */
  readonly #uncommitted = new Map<number, { next: bigint; generation: number }>();
  /** The one offset commit in flight (it sends what was handled meanwhile before it ends). */
  #committing: Promise<void> | undefined;

  static async start(options: ResolvedKafkaBusOptions, subscribe: SubscribeOptions): Promise<Subscription> {
    const subscription = new PlatformaticSubscription(options, subscribe);
    try {
      subscription.#consumer.topics.track(subscribe.topic);
      await subscription.#consumer.joinGroup({
        sessionTimeout: options.sessionTimeoutMs,
        heartbeatInterval: options.heartbeatIntervalMs,
        rebalanceTimeout: options.rebalanceTimeoutMs,
      });
    } catch (err) {
      subscription.#stopping.abort();
      await subscription.#consumer.close(true).catch(() => undefined);
      throw busUnavailable(`subscribe to ${subscribe.topic} failed`, err);
    }
    subscription.#loop = subscription.#run();
    return subscription;
  }

  private constructor(options: ResolvedKafkaBusOptions, subscribe: SubscribeOptions) {
    this.#options = options;
    this.#subscribe = subscribe;
    this.#consumer = new Consumer({
      ...baseOptions(options),
      groupId: subscribe.groupId,
      autocommit: false,
      sessionTimeout: options.sessionTimeoutMs,
      heartbeatInterval: options.heartbeatIntervalMs,
      rebalanceTimeout: options.rebalanceTimeoutMs,
      maxWaitTime: options.maxWaitMs,
    });
    // A rebalance started: stop handing records until the next assignment is known.
    this.#consumer.on('consumer:group:rebalance', () => {
      this.#generation++;
      this.#assigned = undefined;
      this.#positions.clear();
    });
    this.#consumer.on('consumer:group:join', ({ generationId, assignments }) => {
      const partitions = assignments?.find((a) => a.topic === subscribe.topic)?.partitions ?? [];
      // A member that joins again within its generation (the coordinator answers a follower's
      // rejoin with the same generation and assignment) keeps its positions.
      const assigned = `${generationId}:${[...partitions].sort((a, b) => a - b).join(',')}`;
      if (assigned === this.#assigned) return;
      this.#assigned = assigned;
      const generation = ++this.#generation;
      this.#positions.clear();
      for (const partition of partitions) this.#positions.set(partition, { state: 'pending' });
      this.#joined();
      void this.#resolvePositions(generation, partitions);
    });
    // Without a listener an 'error' event (a failed rejoin) would throw out of the client.
    this.#consumer.on('error', (err: Error) => {
      options.log.error(
        { client: 'platformatic', topic: subscribe.topic, groupId: subscribe.groupId, err },
        'consumer error',
      );
      if (!this.#stopping.signal.aborted) void this.#rejoin();
    });
  }

  ready(): Promise<void> {
    return this.#ready;
  }

  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#stopping.abort();
      // The loop ends after the in-flight fetch and handler; then what they handled is committed.
      await this.#loop;
      await this.#commit();
      await this.#committing;
      await this.#consumer.close();
    })();
    return this.#closed;
  }

  async #rejoin(): Promise<void> {
    while (!this.#stopping.signal.aborted) {
      await pause(this.#options.retryBackoffMs, this.#stopping.signal);
      if (this.#stopping.signal.aborted || this.#consumer.isActive()) return;
      try {
        await this.#consumer.joinGroup({
          sessionTimeout: this.#options.sessionTimeoutMs,
          heartbeatInterval: this.#options.heartbeatIntervalMs,
          rebalanceTimeout: this.#options.rebalanceTimeoutMs,
        });
        return;
      } catch (err) {
        this.#options.log.warn(
          { client: 'platformatic', topic: this.#subscribe.topic, err },
          'rejoin failed; retrying',
        );
      }
    }
  }

  /**
   * Start offsets of a new assignment: resumeFrom (told each partition's log:
   * topic id, log start and end, read fresh), else the group's committed
   * offset, else the earliest.
   */
  async #resolvePositions(generation: number, partitions: number[]): Promise<void> {
    const { topic, resumeFrom } = this.#subscribe;
    if (partitions.length === 0) return;
    while (generation === this.#generation && !this.#stopping.signal.aborted) {
      try {
        const metadata = await this.#consumer.metadata({ topics: [topic], forceUpdate: true });
        const topicId = reportedTopicId(topic, metadata.topics.get(topic)?.id);
        const earliest = (
          await this.#consumer.listOffsets({ topics: [topic], timestamp: ListOffsetTimestamps.EARLIEST })
        ).get(topic);
        const latest = (
          await this.#consumer.listOffsets({ topics: [topic], timestamp: ListOffsetTimestamps.LATEST })
        ).get(topic);
        const fromSink = await Promise.all(
          partitions.map(async (p) => {
            if (resumeFrom === undefined) return undefined;
            const start = earliest?.[p] ?? 0n;
            const log: PartitionLog = { start: start.toString(), end: (latest?.[p] ?? start).toString() };
            if (topicId !== undefined) log.topicId = topicId;
            const offset = await resumeFrom(topic, p, log);
            return offset === undefined ? undefined : parseOffset(offset);
          }),
        );
        const committed = (await this.#consumer.listCommittedOffsets({ topics: [{ topic, partitions }] })).get(topic);
        if (generation !== this.#generation) return;
        this.#topicId = topicId;
        partitions.forEach((partition, i) => {
          const stored = committed?.[partition];
          const start = earliest?.[partition] ?? 0n;
          let next = fromSink[i] ?? (stored !== undefined && stored >= 0n ? stored : start);
          // Records below the log start were deleted by retention: the earliest is what is left.
          if (next < start) next = start;
          this.#positions.set(partition, { state: 'open', next });
        });
        return;
      } catch (err) {
        this.#options.log.warn({ client: 'platformatic', topic, err }, 'resolving start offsets failed; retrying');
        await pause(this.#options.retryBackoffMs, this.#stopping.signal);
      }
    }
  }

  /** Every open partition's start offset resolved again (resumeFrom told the log as it is now). */
  #resolveAgain(partitions: number[]): void {
    const next = ++this.#generation;
    for (const p of partitions) this.#positions.set(p, { state: 'pending' });
    void this.#resolvePositions(next, partitions);
  }

  /** Fetch, hand over each partition's records, send its commit; one fetch at a time, so one handler per partition. */
  async #run(): Promise<void> {
    const { topic } = this.#subscribe;
    const signal = this.#stopping.signal;
    while (!signal.aborted) {
      const generation = this.#generation;
      const wanted = [...this.#positions].flatMap(([partition, position]) =>
        position.state === 'open' ? [{ partition, next: position.next }] : [],
      );
      if (wanted.length === 0) {
        await pause(20, signal);
        continue;
      }
      let responses: { response: FetchResponse; topicId: string }[];
      try {
        responses = await this.#fetch(topic, wanted);
      } catch (err) {
        if (signal.aborted) return;
        this.#options.log.warn({ client: 'platformatic', topic, err }, 'fetch failed; retrying');
        if (String((err as Error).message).includes('OFFSET_OUT_OF_RANGE') || hasApiId(err, 'OFFSET_OUT_OF_RANGE')) {
          // Not the log the positions were read in (or retention passed them): resolve them again.
          this.#resolveAgain(wanted.map((w) => w.partition));
        }
        await pause(this.#options.retryBackoffMs, signal);
        continue;
      }
      // The topic was deleted and created again since the positions were resolved: they are
      // offsets of another log.
      const current = responses[0]?.topicId;
      if (current !== undefined && this.#topicId !== undefined && reportedTopicId(topic, current) !== this.#topicId) {
        this.#options.log.warn(
          { client: 'platformatic', topic, topicId: current, was: this.#topicId },
          'topic id changed; resolving start offsets again',
        );
        this.#resolveAgain(wanted.map((w) => w.partition));
        continue;
      }
      // A fetch's partitions are handed over at once (the handler is never called twice at
      // once for one partition); the next fetch waits for all of them.
      const deliveries: Promise<void>[] = [];
      for (const { response, topicId } of responses) {
        for (const topicResponse of response.responses) {
          if (topicResponse.topicId !== topicId) continue;
          for (const partitionResponse of topicResponse.partitions) {
            // A rebalance or close since the fetch: its records may belong to another member now.
            if (signal.aborted || generation !== this.#generation) break;
            const partition = partitionResponse.partitionIndex;
            const position = this.#positions.get(partition);
            const requested = wanted.find((w) => w.partition === partition)?.next;
            if (position?.state !== 'open' || requested === undefined || position.next !== requested) continue;
            const { records, next } = decode(
              topic,
              partition,
              requested,
              partitionResponse.records ?? [],
              partitionResponse.highWatermark.toString(),
            );
            if (records.length === 0) {
              if (next > requested) this.#positions.set(partition, { state: 'open', next });
              continue;
            }
            deliveries.push(this.#deliver(partition, records, next, generation));
          }
        }
      }
      await Promise.all(deliveries);
    }
  }

  async #fetch(topic: string, wanted: { partition: number; next: bigint }[]) {
    const metadata = await this.#consumer.metadata({ topics: [topic] });
    const topicMetadata = metadata.topics.get(topic);
    if (topicMetadata === undefined) throw new Error(`no metadata for ${topic}`);
    const byLeader = new Map<number, { partition: number; next: bigint }[]>();
    for (const w of wanted) {
      const leader = topicMetadata.partitions[w.partition]?.leader ?? -1;
      if (leader < 0) continue;
      byLeader.set(leader, [...(byLeader.get(leader) ?? []), w]);
    }
    return Promise.all(
      [...byLeader].map(async ([node, partitions]) => ({
        topicId: topicMetadata.id,
        response: await this.#consumer.fetch({
          node,
          minBytes: 1,
          maxBytes: FETCH_MAX_BYTES,
          maxWaitTime: this.#options.maxWaitMs,
          topics: [
            {
              topicId: topicMetadata.id,
              partitions: partitions.map((w) => ({
                partition: w.partition,
                fetchOffset: w.next,
                partitionMaxBytes: PARTITION_MAX_BYTES,
                currentLeaderEpoch: -1,
                lastFetchedEpoch: -1,
              })),
            },
          ],
        }),
      })),
    );
  }

  async #deliver(partition: number, records: IncomingRecord[], next: bigint, generation: number): Promise<void> {
    const { topic, handle } = this.#subscribe;
    try {
      await handle(records);
    } catch (err) {
      this.#options.log.warn(
        { client: 'platformatic', topic, partition, offset: records[0]?.offset, err },
        'handler rejected; redelivering',
      );
      // The position stays: the next fetch returns the same records.
      await pause(this.#options.retryBackoffMs, this.#stopping.signal);
      return;
    }
    if (generation !== this.#generation) return; // handled under a past assignment: not committed (see #commit)
    this.#positions.set(partition, { state: 'open', next });
    this.#uncommitted.set(partition, { next, generation });
    // The next fetch does not wait for the commit (a sink that must not see a record twice keeps
    // its own position, as step-context does in Redis).
    void this.#commit();
  }

  /**
   * Commits the handled offsets, one commit at a time, each with every partition's latest;
   * resolves once nothing handled is left uncommitted. Only offsets handled in the current
   * generation are sent, and only while the member is in the group (not rejoining): the
   * library answers a commit the coordinator refuses for its generation (the group moved on
   * meanwhile) by joining the group again, and a leader's join makes the coordinator
   * rebalance the whole group once more. Commits sent on every partition at once left some
   * refused after each rebalance, so each rebalance brought the next: under CPU starvation a
   * group rebalanced every 2 s for as long as records kept coming, each rebalance pausing
   * every member's fetches.
   * What is not committed is delivered again to the partition's next owner: consumers are
   * at-least-once and idempotent (the runner by requestId, step-context by its own offsets).
   */
  #commit(): Promise<void> {
    this.#committing ??= this.#commitHandled().finally(() => {
      this.#committing = undefined;
      // Handled while the last commit was finishing.
      if (this.#uncommitted.size > 0) void this.#commit();
    });
    return this.#committing;
  }

  async #commitHandled(): Promise<void> {
    const { topic } = this.#subscribe;
    for (;;) {
      const generation = this.#generation;
      const offsets = [...this.#uncommitted].flatMap(([partition, handled]) =>
        handled.generation === generation ? [{ topic, partition, offset: handled.next, leaderEpoch: -1 }] : [],
      );
      this.#uncommitted.clear();
      if (offsets.length === 0 || !this.#consumer.isActive()) return;
      await this.#consumer.commit({ offsets }).catch((err) => {
        this.#options.log.warn(
          { client: 'platformatic', topic, partitions: offsets.map((o) => o.partition), err },
          'commit failed',
        );
      });
    }
  }
}

function hasApiId(err: unknown, apiId: string): boolean {
  const seen = new Set<unknown>();
  const visit = (e: unknown): boolean => {
    if (typeof e !== 'object' || e === null || seen.has(e)) return false;
    seen.add(e);
    const record = e as { apiId?: unknown; errors?: unknown; cause?: unknown };
    if (record.apiId === apiId) return true;
    if (Array.isArray(record.errors) && record.errors.some(visit)) return true;
    return visit(record.cause);
  };
  return visit(err);
}

/**
 * The deliverable records of one partition's fetched batches, from `from` on
 * (a fetch may start inside a batch), and the offset after the last batch.
 * Control batches (transaction markers) advance the position but are not records.
 */
function decode(
  topic: string,
  partition: number,
  from: bigint,
  batches: RecordsBatch[],
  highWatermark: string,
): { records: IncomingRecord[]; next: bigint } {
  const records: IncomingRecord[] = [];
  let next = from;
  for (const batch of batches) {
    const end = batch.firstOffset + BigInt(batch.lastOffsetDelta) + 1n;
    if (end > next) next = end;
    if (batch.attributes & IS_CONTROL) continue;
    for (const record of batch.records) {
      const offset = batch.firstOffset + BigInt(record.offsetDelta);
      if (offset < from) continue;
      const headers: Record<string, string> = {};
      for (const [name, value] of record.headers) {
        if (name !== null) headers[name.toString('utf8')] = value?.toString('utf8') ?? '';
      }
      records.push({
        topic,
        partition,
        offset: offset.toString(),
        key: record.key?.toString('utf8') ?? '',
        value: record.value?.toString('utf8') ?? '',
        headers,
        highWatermark,
      });
    }
  }
  return { records, next };
}
