/**
 * Kafka transactions through kafkajs 2.2 (the Transactions port of bus.ts).
 * One kafkajs producer per transactional id: idempotent, one request in
 * flight, acks=all (what transactions require). Opening it runs
 * InitProducerId (an empty transaction begun and ended): the coordinator
 * fences every earlier producer of the id and aborts what it left open, or
 * first finishes its commit if one was under way. A failed `commit` aborts
 * when it still can and leaves the producer closed: its outcome may be
 * unknown, so the caller opens another and reads what was committed.
 *
 * `lastCommitted` reads one partition from near its end with a plain kafkajs
 * consumer in read_committed isolation (kafkajs's default) in a throwaway
 * group, up to the partition's high watermark as a @platformatic/kafka Admin
 * lists it READ_UNCOMMITTED (kafkajs's own ListOffsets answers the last
 * stable offset, which stops short while another transaction is open there).
 * Aborted records and transaction markers are skipped by kafkajs; the read
 * knows it is done from the batch instrumentation event, which kafkajs emits
 * for a batch of markers only as well.
 */
import { randomUUID } from 'node:crypto';
import { FetchIsolationLevels, ListOffsetTimestamps, Admin as LogAdmin } from '@platformatic/kafka';
import type { Kafka, Producer } from 'kafkajs';
import type { IncomingRecord, TopicWrite, TransactionalPublisher, Transactions } from './bus.ts';
import { busUnavailable, type ResolvedKafkaBusOptions } from './kafka-options.ts';
import { baseOptions } from './platformatic-options.ts';

/** Offsets read back from a partition's end first; each further try reads this many times more. */
const FIRST_WINDOW = 256n;
const WINDOW_GROWTH = 16n;
/** transaction.timeout.ms of the producers (the broker's default cap is 15 minutes). */
const TRANSACTION_TIMEOUT_MS = 15_000;

export class KafkajsTransactions implements Transactions {
  readonly #kafka: Kafka;
  readonly #options: ResolvedKafkaBusOptions;

  constructor(kafka: Kafka, options: ResolvedKafkaBusOptions) {
    this.#kafka = kafka;
    this.#options = options;
  }

  async open(transactionalId: string): Promise<TransactionalPublisher> {
    const producer = this.#kafka.producer({
      transactionalId,
      idempotent: true,
      maxInFlightRequests: 1,
      // A relay's transaction is one send and its commit; one left open by a dead relay (and
      // holding back read_committed readers of its partitions) is aborted by the broker after this.
      transactionTimeout: TRANSACTION_TIMEOUT_MS,
      retry: { retries: this.#options.retries },
    });
    try {
      await producer.connect();
      const fence = await producer.transaction();
      await fence.abort();
    } catch (err) {
      await producer.disconnect().catch(() => undefined);
      throw busUnavailable(`initialising the transactions of ${transactionalId} failed`, err);
    }
    return new KafkajsTransactionalPublisher(this.#kafka, this.#options, transactionalId, producer);
  }
}

class KafkajsTransactionalPublisher implements TransactionalPublisher {
  readonly #kafka: Kafka;
  readonly #options: ResolvedKafkaBusOptions;
  readonly #id: string;
  readonly #producer: Producer;
  #broken: unknown;
  #closed: Promise<void> | undefined;

  constructor(kafka: Kafka, options: ResolvedKafkaBusOptions, id: string, producer: Producer) {
    this.#kafka = kafka;
    this.#options = options;
    this.#id = id;
    this.#producer = producer;
  }

  async commit(writes: TopicWrite[]): Promise<void> {
    if (this.#broken !== undefined || this.#closed !== undefined) {
      throw busUnavailable(`the producer of ${this.#id} failed before`, this.#broken ?? 'closed');
    }
    let transaction: Awaited<ReturnType<Producer['transaction']>> | undefined;
    try {
      transaction = await this.#producer.transaction();
      await transaction.sendBatch({
        acks: -1,
        topicMessages: writes.map(({ topic, records, partition }) => ({
          topic,
          messages: records.map((r) => ({
            key: r.key,
            value: r.value,
            headers: { ...(r.headers ?? {}) },
            ...(partition !== undefined ? { partition } : {}),
          })),
        })),
      });
      await transaction.commit();
    } catch (err) {
      this.#broken = err;
      if (transaction?.isActive()) await transaction.abort().catch(() => undefined);
      await this.close();
      throw busUnavailable(`the transaction of ${this.#id} failed`, err);
    }
  }

  async lastCommitted(topic: string, partition: number, key: string): Promise<IncomingRecord | undefined> {
    try {
      const { start, end } = await this.#bounds(topic, partition);
      let from = end;
      let window = FIRST_WINDOW;
      while (from > start) {
        from -= window;
        if (from < start) from = start;
        const found = await this.#readBack(topic, partition, key, from, end);
        if (found !== undefined) return found;
        window *= WINDOW_GROWTH;
      }
      return undefined;
    } catch (err) {
      throw busUnavailable(`reading the last committed record of ${topic}:${partition} failed`, err);
    }
  }

  /** The partition's first offset and its high watermark (READ_UNCOMMITTED: past every open transaction). */
  async #bounds(topic: string, partition: number): Promise<{ start: bigint; end: bigint }> {
    const admin = new LogAdmin(baseOptions(this.#options));
    try {
      const at = async (timestamp: bigint) => {
        const [listed] = await admin.listOffsets({
          isolationLevel: FetchIsolationLevels.READ_UNCOMMITTED,
          topics: [{ name: topic, partitions: [{ partitionIndex: partition, timestamp }] }],
        });
        const offset = listed?.partitions.find((p) => p.partitionIndex === partition)?.offset;
        if (offset === undefined) throw new Error(`no offsets for ${topic}:${partition}`);
        return offset;
      };
      return { start: await at(ListOffsetTimestamps.EARLIEST), end: await at(ListOffsetTimestamps.LATEST) };
    } finally {
      await admin.close().catch(() => undefined);
    }
  }

  /** The last committed record with `key` in [from, end) of the partition, read by a read_committed consumer. */
  async #readBack(
    topic: string,
    partition: number,
    key: string,
    from: bigint,
    end: bigint,
  ): Promise<IncomingRecord | undefined> {
    const groupId = `${this.#options.clientId}-last-committed-${randomUUID()}`;
    const consumer = this.#kafka.consumer({
      groupId,
      maxWaitTimeInMs: 100,
      allowAutoTopicCreation: false,
      retry: { retries: this.#options.retries },
    });
    let last: IncomingRecord | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(new Error(`${topic}:${partition} not read to ${end} within ${this.#options.requestTimeoutMs} ms`)),
          this.#options.requestTimeoutMs,
        );
        const done = () => {
          clearTimeout(timer);
          resolve();
        };
        consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
          if (payload.topic === topic && payload.partition === partition && BigInt(payload.lastOffset) >= end - 1n) {
            done();
          }
        });
        // Emitted after the join, before the generation's first fetch: the read starts at `from`.
        consumer.on(consumer.events.GROUP_JOIN, () => {
          consumer.seek({ topic, partition, offset: from.toString() });
        });
        consumer.on(consumer.events.CRASH, ({ payload }) => {
          clearTimeout(timer);
          reject(payload.error);
        });
        (async () => {
          await consumer.connect();
          await consumer.subscribe({ topic, fromBeginning: false });
          await consumer.run({
            autoCommit: false,
            eachBatch: async ({ batch }) => {
              if (batch.partition !== partition) return;
              for (const m of batch.messages) {
                if (BigInt(m.offset) >= end) break;
                if (m.key?.toString('utf8') !== key) continue;
                last = toRecord(topic, partition, m);
              }
            },
          });
        })().catch((err) => {
          clearTimeout(timer);
          reject(err);
        });
      });
      return last;
    } finally {
      await consumer.disconnect().catch(() => undefined);
      const admin = this.#kafka.admin();
      await admin
        .connect()
        .then(() => admin.deleteGroups([groupId]))
        .catch(() => undefined)
        .finally(() => admin.disconnect().catch(() => undefined));
    }
  }

  close(): Promise<void> {
    this.#closed ??= this.#producer.disconnect().catch(() => undefined);
    return this.#closed;
  }
}

type KafkajsMessage = { offset: string; key: Buffer | null; value: Buffer | null; headers?: Record<string, unknown> };

function toRecord(topic: string, partition: number, m: KafkajsMessage): IncomingRecord {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(m.headers ?? {})) {
    const one = Array.isArray(value) ? value[value.length - 1] : value;
    if (one !== undefined) headers[name] = String(one);
  }
  return {
    topic,
    partition,
    offset: m.offset,
    key: m.key?.toString('utf8') ?? '',
    value: m.value?.toString('utf8') ?? '',
    headers,
  };
}
