import type { Subscription as BusSubscription, IncomingRecord, Publisher, Subscriber } from '@ctxflow/bus';
import {
  type DeadLetterReason,
  deadLetterOf,
  isCtxflowError,
  RECORD_ID_HEADER,
  type TicketUpdate,
  TOPICS,
} from '@ctxflow/contracts';
import type { SubscriptionStore } from '@ctxflow/subscriptions';
import {
  ATTR_FEED_EVENT_ID,
  ATTR_FEED_SOURCE,
  ATTR_PARTITION,
  ATTR_TICKET,
  ATTR_TOPIC,
  SPAN_STEP_CONTEXT_APPLY,
  type SpanAttributes,
  type StartedSpan,
} from '@ctxflow/telemetry';
import type { ConsumerTelemetry } from '../consumer-telemetry.ts';
import type { ConsumedRecord, FeedStreams } from '../ports/feed-streams.ts';
import { DEFAULT_OFFSET_RESET, OffsetGuard, type OffsetResetPolicy } from './offset-check.ts';
import { parseTicketUpdateRecord } from './ticket-update-record.ts';

/** The consumer group of step-context on TOPICS.ticketUpdates. */
export const STEP_CONTEXT_GROUP = 'ctxflow-step-context';

/** The header feed-ingestor puts the update id in. */
export { RECORD_ID_HEADER };

/** What the service logs; a pino logger fits. */
export interface ServiceLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  /** A stored offset that does not fit its log (domain/offset-check.ts). */
  error(fields: object, message: string): void;
  /**
   * Whether a line of `level` would be written (pino's). When it says `info`
   * lines are not, the per-record "ticket update applied" lines are not even
   * built. Absent: every line is built.
   */
  isLevelEnabled?(level: string): boolean;
}

export interface StepContextServiceDeps {
  subscriber: Subscriber;
  /**
   * Not read when applying (the feed stream store checks each stream's followers in
   * its write); accepted so one set of stores wires every part of step-context.
   */
  subscriptions?: SubscriptionStore;
  feedStreams: FeedStreams;
  log?: ServiceLog;
  /** Default TOPICS.ticketUpdates. */
  topic?: string;
  /**
   * Where records that cannot be applied go (see the class comment): a
   * publisher on the same bus, publishing to `deadLetterTopic`. Absent: such
   * records are only logged and skipped.
   */
  deadLetters?: Publisher;
  /** Default TOPICS.ticketUpdatesDlq. */
  deadLetterTopic?: string;
  /** Default STEP_CONTEXT_GROUP. */
  groupId?: string;
  /**
   * One `ctxflow.step_context.apply` span (CONSUMER) per record, child of the
   * trace context in the record's `traceparent` header (the feed-ingestor's
   * publish span); its own traceparent is stored with the entries it appends.
   * The spans of one write all last the whole write: started before it, ended
   * together once its atomic write is done (never the active span: nothing
   * runs inside them). Default: none.
   */
  telemetry?: ConsumerTelemetry;
  /**
   * Most records applied by one atomic feed-streams write (default
   * MAX_RECORDS_PER_WRITE). A bigger delivery is applied in runs of this size,
   * one after the other: it bounds how long one script holds Redis.
   */
  maxRecordsPerWrite?: number;
  /**
   * What to do with a partition whose stored offset does not fit its log at an
   * assignment (another topic id, past its end, below its start): see
   * domain/offset-check.ts. Default `earliest`.
   */
  offsetReset?: OffsetResetPolicy;
}

/** Default of `maxRecordsPerWrite`: a run's script stays within a few ms of Redis time. */
export const MAX_RECORDS_PER_WRITE = 200;

const silent: ServiceLog = { info() {}, warn() {}, error() {} };

/** A record as parsed: its update, or undefined for a poison record (dead-lettered, then skipped). */
interface Parsed {
  record: IncomingRecord;
  update: TicketUpdate | undefined;
  /** Why a poison record is one. */
  poison?: { reason: DeadLetterReason; error: string };
}

/**
 * Consumes ticket updates and stores each once in every feed stream it belongs
 * to that has a follower (its ticket's, its scope's, its source's: see
 * ports/feed-streams.ts), exactly once: the feed stream store records the consumed
 * offset in the same atomic write as the entries, and the bus resumes each
 * partition from there (`resumeFrom`), once that offset is checked against
 * the partition's log (offset-check.ts: a topic created again, or a Redis
 * restored from another copy, is detected and reset, never skipped in
 * silence). No per-session work: an update costs
 * the same whatever the number of sessions following it.
 *
 * A delivery (records of one partition, in offset order) is applied in runs of
 * at most `maxRecordsPerWrite` records, each run with one store call: one
 * atomic write of all of them with the run's last offset (`applyRun`).
 * Records at or below the stored offset are skipped by that write (a
 * redelivery, or late writes of a consumer that lost the partition).
 *
 * A record is a TicketUpdate (unknown fields kept) or a CloudEvent of the
 * Kafka binding, binary or structured (ticket-update-record.ts). A record that
 * is neither (poison) is published onto the dead-letter topic (`deadLetters`)
 * with its reason and position, and only once that publish is acknowledged is
 * its offset recorded (with its run, in the store's atomic write): a
 * dead-letter publish that fails rejects the delivery, and the bus delivers the
 * run again. A record the store refuses with a non-retryable error (`failed`)
 * is found by applying its run one record at a time, dead-lettered the same way
 * and its offset recorded alone. Poison is never a crash and never stalls its
 * partition. Any other store failure rejects the delivery: the bus delivers it
 * again, and the offset check drops what was already applied.
 */
export class StepContextService {
  readonly #deps: StepContextServiceDeps;
  readonly #log: ServiceLog;
  readonly #maxRecordsPerWrite: number;
  #subscription: BusSubscription | undefined;

  constructor(deps: StepContextServiceDeps) {
    const max = deps.maxRecordsPerWrite ?? MAX_RECORDS_PER_WRITE;
    if (!Number.isSafeInteger(max) || max < 1) throw new Error(`maxRecordsPerWrite ${max} is not a positive integer`);
    this.#deps = deps;
    this.#log = deps.log ?? silent;
    this.#maxRecordsPerWrite = max;
  }

  /** Joins the consumer group; resolves once the first assignment is in place. */
  async start(): Promise<void> {
    if (this.#subscription) return;
    const group = this.#deps.groupId ?? STEP_CONTEXT_GROUP;
    const telemetry = this.#deps.telemetry;
    const guard = new OffsetGuard({
      feedStreams: this.#deps.feedStreams,
      policy: this.#deps.offsetReset ?? DEFAULT_OFFSET_RESET,
      group,
      log: this.#log,
      ...(telemetry ? { mismatched: (e) => telemetry.offsetMismatch(e) } : {}),
    });
    this.#subscription = await this.#deps.subscriber.subscribe({
      topic: this.#deps.topic ?? TOPICS.ticketUpdates,
      groupId: group,
      handle: (records) => this.handle(records),
      resumeFrom: (topic, partition, log) => guard.resumeFrom(topic, partition, log),
    });
    await this.#subscription.ready();
  }

  /** A readiness probe: resolves while the consumer is subscribed and assigned; throws once stopped or before start. */
  async ready(): Promise<void> {
    if (!this.#subscription) throw new Error('the ticket-update consumer is not running');
    await this.#subscription.ready();
  }

  async stop(): Promise<void> {
    const subscription = this.#subscription;
    this.#subscription = undefined;
    await subscription?.close();
  }

  /** Applies records of one partition in order (the bus handler; public for tests). */
  async handle(records: IncomingRecord[]): Promise<void> {
    const max = this.#maxRecordsPerWrite;
    for (let i = 0; i < records.length; i += max) await this.#applyRunOrSplit(records.slice(i, i + max));
  }

  /**
   * A run; when the store refuses it with a non-retryable error, its records
   * one at a time, and a single record it still refuses is dead-lettered as
   * `failed` and consumed with nothing applied.
   */
  async #applyRunOrSplit(records: IncomingRecord[]): Promise<void> {
    try {
      await this.#applyRun(records.map((record) => this.#parse(record)));
    } catch (err) {
      if (!isCtxflowError(err) || err.retryable) throw err;
      if (records.length > 1) {
        for (const record of records) await this.#applyRunOrSplit([record]);
        return;
      }
      const record = records[0]!;
      this.#log.warn(
        { ...where(record), code: err.code, error: err.message },
        'ticket update skipped: failed for good',
      );
      await this.#applyRun([
        { record, update: undefined, poison: { reason: 'failed', error: `${err.code}: ${err.message}` } },
      ]);
    }
  }

  /**
   * Publishes the dead letters of a run's poison records, except those already
   * consumed (a redelivery after a later run failed), and resolves once the
   * dead-letter topic acknowledged them.
   */
  async #deadLetter(parsed: Parsed[]): Promise<void> {
    const poison = parsed.filter((p) => p.poison !== undefined);
    const first = poison[0];
    if (first === undefined) return;
    const publisher = this.#deps.deadLetters;
    if (!publisher) return;
    const next = await this.#deps.feedStreams.resumeFrom(first.record.topic, first.record.partition);
    const fresh = poison.filter((p) => next === undefined || BigInt(p.record.offset) >= BigInt(next));
    if (fresh.length === 0) return;
    await publisher.publish(
      this.#deps.deadLetterTopic ?? TOPICS.ticketUpdatesDlq,
      fresh.map(({ record, poison: why }) => deadLetterOf(record, why!.reason, why!.error)),
    );
    const group = this.#deps.groupId ?? STEP_CONTEXT_GROUP;
    for (const { record, poison: why } of fresh) {
      this.#deps.telemetry?.deadLettered({ group, topic: record.topic, reason: why!.reason });
    }
  }

  /** One run: parse, one atomic write; the records' spans last the whole run. */
  async #applyRun(parsed: Parsed[]): Promise<void> {
    const records = parsed.map((p) => p.record);
    // Acknowledged before the write that records these offsets: nothing is lost.
    await this.#deadLetter(parsed);
    const spans = this.#startSpans(parsed);
    let failure: unknown;
    try {
      const run = parsed.map(({ record, update }, i): ConsumedRecord => {
        const position = { topic: record.topic, partition: record.partition, offset: record.offset };
        if (!update) return { position };
        const entry: ConsumedRecord = { position, update };
        const traceparent = spans?.[i]?.traceparent;
        if (traceparent) entry.traceparent = traceparent;
        return entry;
      });
      const results = await this.#deps.feedStreams.applyRun(run);
      if (this.#logsApplied()) {
        results.forEach((result, i) => {
          const { record, update } = parsed[i]!;
          // Not applied: consumed before, the atomic offset check skipped it.
          if (!update || !result.applied) return;
          const outcome = result.outcome!;
          this.#log.info(
            {
              ...where(record),
              updateId: update.id,
              outcome: outcome.outcome,
              streams: outcome.outcome === 'appended' ? outcome.streams : 0,
              // The run spans several records' spans, none of them active here: name this record's.
              ...spans?.[i]?.logFields(),
            },
            'ticket update applied',
          );
        });
      }
    } catch (err) {
      failure = err;
      throw err;
    } finally {
      // One loop once the write is done (or failed: each span records the run's error).
      if (spans) for (const span of spans) span.end(failure);
    }
    this.#reportLag(records[records.length - 1]);
  }

  /** Whether the "ticket update applied" lines would be written: never without a logger, else as its level says. */
  #logsApplied(): boolean {
    const log = this.#deps.log;
    return log !== undefined && (log.isLevelEnabled?.('info') ?? true);
  }

  /** Records between the last handled record and the partition's end, when the bus reported the end. */
  #reportLag(last: IncomingRecord | undefined): void {
    if (!last?.highWatermark || !this.#deps.telemetry) return;
    const lag = BigInt(last.highWatermark) - BigInt(last.offset) - 1n;
    this.#deps.telemetry.lag({
      group: this.#deps.groupId ?? STEP_CONTEXT_GROUP,
      topic: last.topic,
      partition: last.partition,
      lag: Number(lag < 0n ? 0n : lag),
    });
  }

  #parse(record: IncomingRecord): Parsed {
    const parsed = parseTicketUpdateRecord(record, new Date().toISOString());
    if ('problem' in parsed) {
      const fields = parsed.problem === 'not JSON' ? { reason: parsed.issues[0] } : { issues: parsed.issues };
      this.#log.warn({ ...where(record), ...fields }, `ticket update skipped: ${parsed.problem}`);
      const reason: DeadLetterReason = parsed.problem === 'not JSON' ? 'not_json' : 'invalid';
      return { record, update: undefined, poison: { reason, error: parsed.issues.join('; ') } };
    }
    return { record, update: parsed.update };
  }

  /**
   * One apply span per record (see StepContextServiceDeps.telemetry), started
   * before the run's store calls; undefined without telemetry.
   */
  #startSpans(parsed: Parsed[]): StartedSpan[] | undefined {
    const telemetry = this.#deps.telemetry;
    if (!telemetry) return undefined;
    return parsed.map(({ record, update }) =>
      telemetry.startSpan(SPAN_STEP_CONTEXT_APPLY, () => applyAttributes(record, update), {
        kind: 'consumer',
        parentHeaders: record.headers,
      }),
    );
  }
}

/** The attributes of a record's apply span: where it came from and, when it parsed, which update it is. */
function applyAttributes(record: IncomingRecord, update: TicketUpdate | undefined): SpanAttributes {
  return update
    ? {
        [ATTR_TOPIC]: record.topic,
        [ATTR_PARTITION]: record.partition,
        [ATTR_TICKET]: update.ticket,
        [ATTR_FEED_SOURCE]: update.source,
        [ATTR_FEED_EVENT_ID]: update.id,
      }
    : { [ATTR_TOPIC]: record.topic, [ATTR_PARTITION]: record.partition };
}

/** Where a record came from, for its log lines. */
function where(record: IncomingRecord) {
  return {
    topic: record.topic,
    partition: record.partition,
    offset: record.offset,
    key: record.key,
    recordId: record.headers[RECORD_ID_HEADER],
  };
}
