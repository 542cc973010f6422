/**
 * The bus's consumer on @platformatic/kafka: the library's group membership
 * (join, sync, heartbeats, rejoin on rebalance) and its `MessagesStream`, one
 * stream per assignment, opened in `manual` mode at the offsets this adapter
 * chose (platformatic-start-offsets.ts), committed through the stream's own
 * `message.commit()` once the handler resolved.
 *
 * The stream reads ahead of the handler; its records wait here per partition
 * and each partition's waiting records go to `handle` as one call, one call at
 * a time per partition. A rejection hands the same records again after the
 * backoff. The stream's position is not moved by hand: when the partition's
 * log changes, the stream is closed and a new one opened at the offsets the
 * sink gives again (`resumeFrom`). The stream is opened with `fallbackMode:
 * 'fail'`, because the library's own recovery of an out-of-range offset moves
 * the stream to the log's start or end without telling which partition moved,
 * so a sink keeping its own offsets could not be asked first
 * (docs/platformatic-kafka.md). The topic id and high watermark of each fetch
 * are read on the library's `consumer:fetches` diagnostics channel.
 */

import type { Consumer, Message, MessagesStream } from '@platformatic/kafka';
import {
  consumerFetchesChannel,
  findErrorBy,
  Consumer as KafkaConsumer,
  MessagesStreamFallbackModes,
  MessagesStreamModes,
  stringDeserializers,
} from '@platformatic/kafka';
import type { IncomingRecord, SubscribeOptions, Subscription } from './bus.ts';
import type { ResolvedKafkaBusOptions } from './kafka-options.ts';
import { busUnavailable, pause } from './kafka-options.ts';
import { reportedTopicId } from './partition-log.ts';
import { baseOptions } from './platformatic-options.ts';
import { startOffsets } from './platformatic-start-offsets.ts';

type StringConsumer = Consumer<string, string, string, string>;
type StringMessage = Message<string, string, string, string>;
type Stream = MessagesStream<string, string, string, string>;
type FetchResponse = Awaited<ReturnType<StringConsumer['fetch']>>;

/** Most bytes one fetch returns per partition (Kafka's own default, 1 MiB), and in all. */
const PARTITION_MAX_BYTES = 1_048_576;
const FETCH_MAX_BYTES = 52_428_800;
/** Records waiting for the handler, all partitions together, at which the stream is paused. */
const MAX_WAITING = 1_024;

/** One assigned partition: what was handled, what waits for the handler, the call in flight. */
interface Delivery {
  /** The offset after the last record the handler resolved (where a new stream reads from). */
  next: bigint;
  /** The offset after the last record waiting or in flight: the stream's records below it are not taken. */
  taken: bigint;
  waiting: StringMessage[];
  running: Promise<void> | undefined;
}

export class PlatformaticSubscription implements Subscription {
  readonly #consumer: StringConsumer;
  readonly #options: ResolvedKafkaBusOptions;
  readonly #subscribe: SubscribeOptions;
  readonly #stopping = new AbortController();
  #joined!: () => void;
  readonly #ready = new Promise<void>((resolve) => {
    this.#joined = resolve;
  });
  #closed: Promise<void> | undefined;
  /** Bumped by every rebalance and assignment: what a past generation handled is neither handed on nor committed. */
  #generation = 0;
  /** The Kafka generation and partitions of the assignment in place; undefined once a rebalance began. */
  #assigned: string | undefined;
  #partitions: number[] = [];
  #deliveries = new Map<number, Delivery>();
  /** The stream reading the assignment; undefined while none is open. */
  #stream: Stream | undefined;
  #paused = false;
  /** Streams closing: the next one opens after them. */
  #streamsClosed: Promise<unknown> = Promise.resolve();
  /** The topic id the offsets in place belong to; undefined when the broker reports none. */
  #topicId: string | undefined;
  /** Per partition, the high watermark of the stream's last fetch, decimal string. */
  readonly #highWatermarks = new Map<number, string>();
  readonly #onFetch = (context: unknown) => this.#fetched(context);

  static async start(options: ResolvedKafkaBusOptions, subscribe: SubscribeOptions): Promise<Subscription> {
    const subscription = new PlatformaticSubscription(options, subscribe);
    try {
      subscription.#consumer.topics.track(subscribe.topic);
      await subscription.#join();
    } catch (err) {
      subscription.#stopping.abort();
      consumerFetchesChannel.asyncStart.unsubscribe(subscription.#onFetch);
      await subscription.#consumer.close(true).catch(() => undefined);
      throw busUnavailable(`subscribe to ${subscribe.topic} failed`, err);
    }
    return subscription;
  }

  private constructor(options: ResolvedKafkaBusOptions, subscribe: SubscribeOptions) {
    this.#options = options;
    this.#subscribe = subscribe;
    this.#consumer = new KafkaConsumer({
      ...baseOptions(options),
      groupId: subscribe.groupId,
      autocommit: false,
      sessionTimeout: options.sessionTimeoutMs,
      heartbeatInterval: options.heartbeatIntervalMs,
      rebalanceTimeout: options.rebalanceTimeoutMs,
      maxWaitTime: options.maxWaitMs,
      deserializers: stringDeserializers,
    });
    // A rebalance started: hand nothing more over until the next assignment is known.
    this.#consumer.on('consumer:group:rebalance', () => {
      this.#generation++;
      this.#assigned = undefined;
      this.#detach();
    });
    this.#consumer.on('consumer:group:join', ({ generationId, assignments }) => {
      const partitions = [...(assignments?.find((a) => a.topic === subscribe.topic)?.partitions ?? [])].sort(
        (a, b) => a - b,
      );
      // A member that joins again within its generation (the coordinator answers a follower's
      // rejoin with the same generation and assignment) keeps its stream and positions.
      const assigned = `${generationId}:${partitions.join(',')}`;
      if (assigned === this.#assigned) return;
      this.#assigned = assigned;
      const generation = ++this.#generation;
      this.#detach();
      this.#partitions = partitions;
      this.#joined();
      void this.#open(generation, true);
    });
    // Without a listener an 'error' event (a failed rejoin) would throw out of the client.
    this.#consumer.on('error', (err: Error) => {
      options.log.error(
        { client: 'platformatic', topic: subscribe.topic, groupId: subscribe.groupId, err },
        'consumer error',
      );
      if (!this.#stopping.signal.aborted) void this.#rejoin();
    });
    consumerFetchesChannel.asyncStart.subscribe(this.#onFetch);
  }

  ready(): Promise<void> {
    return this.#ready;
  }

  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#stopping.abort();
      await Promise.all([...this.#deliveries.values()].map((d) => d.running));
      // Closing the stream sends the commits the handlers queued on it, and waits for them.
      const stream = this.#stream;
      this.#stream = undefined;
      await stream?.close().catch((err) => this.#warn('closing the stream failed', { err }));
      await this.#streamsClosed;
      consumerFetchesChannel.asyncStart.unsubscribe(this.#onFetch);
      await this.#consumer.close(true);
    })();
    return this.#closed;
  }

  #join(): Promise<unknown> {
    return this.#consumer.joinGroup({
      sessionTimeout: this.#options.sessionTimeoutMs,
      heartbeatInterval: this.#options.heartbeatIntervalMs,
      rebalanceTimeout: this.#options.rebalanceTimeoutMs,
    });
  }

  /** After a rejoin that failed the library schedules no other: join again until it works. */
  async #rejoin(): Promise<void> {
    while (!this.#stopping.signal.aborted) {
      await pause(this.#options.retryBackoffMs, this.#stopping.signal);
      if (this.#stopping.signal.aborted || this.#consumer.isActive()) return;
      try {
        await this.#join();
        return;
      } catch (err) {
        this.#warn('rejoin failed; retrying', { err });
      }
    }
  }

  /**
   * Opens the stream of the assignment of `generation` once the previous
   * stream is closed and its handler calls have ended: at fresh start offsets
   * (`resolve`: a new assignment or a new log), else where handling stopped.
   */
  async #open(generation: number, resolve: boolean): Promise<void> {
    const { topic, resumeFrom } = this.#subscribe;
    const current = () => generation === this.#generation && !this.#stopping.signal.aborted;
    while (current()) {
      try {
        await this.#streamsClosed;
        await Promise.all([...this.#deliveries.values()].map((d) => d.running));
        if (!current()) return;
        if (this.#partitions.length === 0) return;
        if (resolve) {
          const partitions = this.#partitions;
          const start = await startOffsets(this.#consumer, topic, partitions, resumeFrom);
          if (!current()) return;
          this.#topicId = start.topicId;
          this.#deliveries = new Map(
            partitions.map((p) => {
              const next = start.offsets.get(p) ?? 0n;
              return [p, { next, taken: next, waiting: [], running: undefined }];
            }),
          );
          resolve = false;
        }
        const stream = await this.#consumer.consume({
          topics: [topic],
          mode: MessagesStreamModes.MANUAL,
          offsets: [...this.#deliveries].map(([partition, d]) => ({ topic, partition, offset: d.next })),
          fallbackMode: MessagesStreamFallbackModes.FAIL,
          autocommit: false,
          maxWaitTime: this.#options.maxWaitMs,
          maxBytes: FETCH_MAX_BYTES,
          maxBytesPerPartition: PARTITION_MAX_BYTES,
        });
        if (!current()) {
          await stream.close();
          return;
        }
        this.#attach(stream, generation);
        return;
      } catch (err) {
        if (!current()) return;
        this.#warn('opening the stream failed; retrying', { err });
        await pause(this.#options.retryBackoffMs, this.#stopping.signal);
      }
    }
  }

  #attach(stream: Stream, generation: number): void {
    this.#stream = stream;
    this.#paused = false;
    for (const d of this.#deliveries.values()) {
      d.waiting = [];
      d.taken = d.next;
    }
    let failure: Error | undefined;
    stream.on('data', (message) => this.#receive(stream, generation, message));
    stream.on('error', (err) => {
      failure = err;
    });
    stream.once('close', () => this.#ended(stream, generation, failure));
  }

  /** Stops taking the stream's records (waiting ones are dropped: a new stream reads them again) and closes it. */
  #detach(): void {
    for (const d of this.#deliveries.values()) d.waiting = [];
    const stream = this.#stream;
    if (stream === undefined) return;
    // At once: records the stream pushes from here on are not taken. The close itself waits for
    // the current tick (this can run inside the stream's fetch callback).
    this.#stream = undefined;
    const closed = new Promise<void>((resolve) => queueMicrotask(resolve)).then(() =>
      stream.close().catch(() => undefined),
    );
    this.#streamsClosed = Promise.all([this.#streamsClosed, closed]);
  }

  /**
   * The stream ended by itself (a fetch failed): a new one reads on from what
   * was handled, or from the offsets the sink gives again when the offset was
   * out of range (the log is not the one it was: recreated, or retention).
   */
  #ended(stream: Stream, generation: number, failure: Error | undefined): void {
    if (stream !== this.#stream || this.#stopping.signal.aborted) return;
    const outOfRange = failure !== undefined && findErrorBy(failure, 'apiId', 'OFFSET_OUT_OF_RANGE') !== null;
    this.#warn(outOfRange ? 'offset out of range; resolving start offsets again' : 'stream ended; reopening', {
      err: failure,
    });
    this.#detach();
    void pause(this.#options.retryBackoffMs, this.#stopping.signal).then(() => this.#open(generation, outOfRange));
  }

  /** A fetch of the stream in place answered: its topic id must be the one the offsets belong to. */
  #fetched(context: unknown): void {
    const { client, options, result } = context as {
      client?: unknown;
      options?: { connectionPool?: unknown };
      result?: FetchResponse;
    };
    const stream = this.#stream;
    if (client !== this.#consumer || stream === undefined || result === undefined) return;
    if (options?.connectionPool !== stream.connections) return;
    const { topic } = this.#subscribe;
    for (const topicResponse of result.responses) {
      const topicId = reportedTopicId(topic, topicResponse.topicId);
      if (this.#topicId !== undefined && topicId !== undefined && topicId !== this.#topicId) {
        // The topic was deleted and created again: the offsets in place are another log's.
        this.#warn('topic id changed; resolving start offsets again', { topicId, was: this.#topicId });
        this.#detach();
        void this.#open(this.#generation, true);
        return;
      }
      for (const p of topicResponse.partitions) this.#highWatermarks.set(p.partitionIndex, p.highWatermark.toString());
    }
  }

  #receive(stream: Stream, generation: number, message: StringMessage): void {
    if (stream !== this.#stream || generation !== this.#generation || this.#stopping.signal.aborted) return;
    const delivery = this.#deliveries.get(message.partition);
    if (delivery === undefined || message.offset < delivery.taken) return;
    delivery.waiting.push(message);
    delivery.taken = message.offset + 1n;
    if (!this.#paused && this.#waiting() >= MAX_WAITING) {
      this.#paused = true;
      stream.pause();
    }
    this.#drain(delivery, generation);
  }

  #waiting(): number {
    let count = 0;
    for (const d of this.#deliveries.values()) count += d.waiting.length;
    return count;
  }

  /** Hands a partition's waiting records to the handler unless a call for it is in flight. */
  #drain(delivery: Delivery, generation: number): void {
    if (delivery.running !== undefined || delivery.waiting.length === 0) return;
    if (generation !== this.#generation || this.#stopping.signal.aborted) return;
    const batch = delivery.waiting;
    delivery.waiting = [];
    delivery.running = this.#deliver(delivery, batch, generation).finally(() => {
      delivery.running = undefined;
      if (this.#paused && this.#waiting() < MAX_WAITING / 2) {
        this.#paused = false;
        this.#stream?.resume();
      }
      this.#drain(delivery, generation);
    });
  }

  async #deliver(delivery: Delivery, batch: StringMessage[], generation: number): Promise<void> {
    const records = batch.map((m) => this.#incoming(m));
    for (;;) {
      try {
        await this.#subscribe.handle(records);
        break;
      } catch (err) {
        this.#warn('handler rejected; redelivering', {
          partition: records[0]?.partition,
          offset: records[0]?.offset,
          err,
        });
        await pause(this.#options.retryBackoffMs, this.#stopping.signal);
        if (generation !== this.#generation || this.#stopping.signal.aborted) return;
      }
    }
    // Handled under a past assignment: neither moved on nor committed (its next owner reads it again).
    if (generation !== this.#generation) return;
    const last = batch[batch.length - 1];
    if (last === undefined) return;
    delivery.next = last.offset + 1n;
    // The stream's commit: one in flight at a time, the highest offset per partition, held while the
    // member rejoins and sent once it is back in the group.
    Promise.resolve(last.commit()).catch((err) => this.#warn('commit failed', { partition: last.partition, err }));
  }

  #incoming(message: StringMessage): IncomingRecord {
    const headers: Record<string, string> = {};
    for (const [name, value] of message.headers) {
      if (name !== undefined && name !== null) headers[name] = value ?? '';
    }
    const record: IncomingRecord = {
      topic: message.topic,
      partition: message.partition,
      offset: message.offset.toString(),
      key: message.key ?? '',
      value: message.value ?? '',
      headers,
    };
    const highWatermark = this.#highWatermarks.get(message.partition);
    if (highWatermark !== undefined) record.highWatermark = highWatermark;
    return record;
  }

  #warn(message: string, fields: Record<string, unknown>): void {
    this.#options.log.warn({ client: 'platformatic', topic: this.#subscribe.topic, ...fields }, message);
  }
}
