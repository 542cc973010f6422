/**
 * The message bus port: what services need from Kafka, with no client-library
 * types. Adapters: memory-bus.ts (embedded default), kafkajs-bus.ts,
 * platformatic-bus.ts; all pass test/contract/bus.contract.ts.
 */

/** One record to publish. `value` is the JSON text of a contracts schema. */
export interface OutgoingRecord {
  /** Partition key: records with one key keep their order. */
  key: string;
  value: string;
  /** Trace context and record ids travel here. */
  headers?: Record<string, string>;
}

/** One record as consumed, with its position. */
export interface IncomingRecord {
  topic: string;
  partition: number;
  /** Decimal string; Kafka offsets exceed 2^53. */
  offset: string;
  key: string;
  value: string;
  headers: Record<string, string>;
  /**
   * The partition's end (the offset its next record will get) as the broker
   * reported it with the fetch that brought this record, decimal string;
   * undefined when the adapter does not know. Consumer lag once this record
   * is handled: `highWatermark - offset - 1` records.
   */
  highWatermark?: string;
}

export interface Publisher {
  /**
   * Resolves only after the bus durably acknowledged every record (acks=all on
   * Kafka); rejects with a `bus_unavailable` CtxflowError otherwise, in which
   * case some records may have been written (callers dedupe by record id).
   */
  publish(topic: string, records: OutgoingRecord[]): Promise<void>;
  close(): Promise<void>;
}

export interface SubscribeOptions {
  topic: string;
  /**
   * Consumer group: subscriptions with one group id split the topic's
   * partitions between them (each partition is handled by one member at a
   * time) and share committed offsets; other groups each see every record.
   */
  groupId: string;
  /**
   * Handles the records of ONE partition, in offset order. Resolve only once the
   * output is durable; the adapter then marks the offsets consumed. A rejection
   * makes the adapter deliver the same records again (from the first record of
   * the batch, after a short backoff), so a handler must be safe to repeat.
   * Never called synchronously from `publish`, never twice at once for one
   * partition of one group.
   */
  handle(records: IncomingRecord[]): Promise<void>;
  /**
   * Where to resume a partition when it is assigned: the next offset to read as
   * stored by the sink in its own atomic write (exactly-once into the sink).
   * Undefined: the group's committed offset, or the earliest offset (a new
   * group reads the topic from its beginning). Called on every assignment,
   * and again whenever the adapter finds the partition's log is not the one
   * it was reading (its offset out of range, or another topic id), always
   * before any record of that partition reaches `handle`; records below the
   * returned offset are never handed to `handle`. An offset below `log.start`
   * reads from `log.start` (what retention left). A rejection is retried.
   *
   * `log` is the partition's log as the broker described it just before the
   * call: a sink that stores offsets checks they belong to it. `committed` is
   * the group's committed offset for the partition, read with it (undefined:
   * none), so a consumer that keeps no offsets of its own checks that one.
   */
  resumeFrom?(
    topic: string,
    partition: number,
    log: PartitionLog,
    committed?: CommittedOffset,
  ): Promise<string | undefined>;
}

/**
 * A consumer group's committed offset for one partition. The adapters commit
 * the topic id of the log they read beside the offset (Kafka's commit
 * metadata; partition-log.ts), so an offset committed by a member that was
 * still reading a topic since deleted is told apart from one of the log now
 * under the name.
 */
export interface CommittedOffset {
  /** The next offset to read, decimal string. */
  offset: string;
  /**
   * The topic id of the log the committing member read; undefined when the
   * commit named none (a commit by another tool, such as an offset reset with
   * Kafka's scripts, or by @platformatic/kafka, whose commits carry no metadata).
   */
  topicId?: string;
}

/**
 * A partition's log as the broker describes it: which log it is and the range
 * of offsets it holds.
 */
export interface PartitionLog {
  /**
   * The topic's id: Kafka gives every topic a UUID when it is created, so a
   * topic deleted and created again under the same name has another one.
   * Undefined when the broker does not report topic ids (before Metadata v10,
   * Kafka 2.8).
   */
  topicId?: string;
  /** Offset of the partition's first record still held (after retention), decimal string. */
  start: string;
  /** Offset its next record will get (the high watermark), decimal string; `start` when it holds none. */
  end: string;
}

export interface Subscription {
  /** Resolves when the consumer has joined its group and has its assignment. */
  ready(): Promise<void>;
  /** Stops fetching, waits for the in-flight handler, commits offsets, leaves the group. */
  close(): Promise<void>;
}

export interface Subscriber {
  /**
   * Joins the group and starts delivering in the background; `ready()` on the
   * result tells when the first assignment is in place. Rejects with a
   * `bus_unavailable` CtxflowError when the bus cannot be reached.
   */
  subscribe(options: SubscribeOptions): Promise<Subscription>;
}

/** A topic to create: `config` holds topic configs set at creation (`cleanup.policy`...). */
export interface TopicSpec {
  name: string;
  partitions: number;
  config?: Record<string, string>;
}

/** Creates topics if missing (idempotent); an existing topic is left as it is. */
export interface TopicAdmin {
  ensureTopics(topics: TopicSpec[]): Promise<void>;
  close(): Promise<void>;
}

/** Records for one topic within a transaction; `partition` set: all of them go there, not by key. */
export interface TopicWrite {
  topic: string;
  records: OutgoingRecord[];
  partition?: number;
}

/**
 * A transactional producer (Kafka transactions): each `commit` writes its
 * records, over any topics, as one transaction, so a read_committed consumer
 * sees all of them or none. Opening a producer with a transactional id fences
 * every earlier producer of that id (their later commits reject) and ends
 * the transaction they left open (aborted).
 */
export interface TransactionalPublisher {
  /**
   * Writes and commits one transaction; resolves once committed. Rejects with
   * a `bus_unavailable` CtxflowError otherwise: the transaction was aborted,
   * or its outcome is unknown (the commit's answer lost), so the producer is
   * unusable: close it, open another and read what was committed
   * (`lastCommitted`). A fenced producer rejects every commit.
   */
  commit(writes: TopicWrite[]): Promise<void>;
  /**
   * The last record with `key` that a committed transaction wrote to
   * `partition` of `topic` (read_committed); undefined when there is none.
   * Read after this producer's open, it sees every transaction an earlier
   * producer of the same id committed.
   */
  lastCommitted(topic: string, partition: number, key: string): Promise<IncomingRecord | undefined>;
  close(): Promise<void>;
}

export interface Transactions {
  /** A producer of `transactionalId`, its transactions initialised (every earlier producer of that id fenced). */
  open(transactionalId: string): Promise<TransactionalPublisher>;
}
