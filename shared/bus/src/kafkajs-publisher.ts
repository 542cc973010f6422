/**
 * The bus's publisher on kafkajs 2.2: idempotent, acks=all, one request in
 * flight and one send at a time (publish calls made meanwhile go out together
 * in the next send), a fresh producer after a failed send.
 */

import type { Kafka, Message, Producer, TopicMessages } from 'kafkajs';
import type { OutgoingRecord, Publisher } from './bus.ts';
import type { ResolvedKafkaBusOptions } from './kafka-options.ts';
import { busUnavailable } from './kafka-options.ts';

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
