import type { Subscription as BusSubscription, IncomingRecord, Subscriber } from '@ctxflow/bus';
import { TOPICS, ticketUpdateSchema } from '@ctxflow/contracts';
import {
  ATTR_FEED_EVENT_ID,
  ATTR_FEED_SOURCE,
  ATTR_PARTITION,
  ATTR_TICKET,
  ATTR_TOPIC,
  type ConsumerTelemetry,
  noopConsumerTelemetry,
  SPAN_STEP_CONTEXT_APPLY,
  type SpanHandle,
} from '@ctxflow/telemetry';
import type { BatchStore } from './batch-store.ts';
import type { SubscriptionStore } from './subscription-store.ts';

/** The consumer group of step-context on TOPICS.ticketUpdates. */
export const STEP_CONTEXT_GROUP = 'ctxflow-step-context';

/** The header feed-ingestor puts the update id in. */
export const RECORD_ID_HEADER = 'ctxflow-record-id';

/** What the service logs; a pino logger fits. */
export interface ServiceLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface StepContextServiceDeps {
  subscriber: Subscriber;
  subscriptions: SubscriptionStore;
  batches: BatchStore;
  log?: ServiceLog;
  /** Default TOPICS.ticketUpdates. */
  topic?: string;
  /** Default STEP_CONTEXT_GROUP. */
  groupId?: string;
  /**
   * One `ctxflow.step_context.apply` span (CONSUMER) per record, child of the
   * trace context in the record's `traceparent` header (the feed-ingestor's
   * publish span); its own traceparent is stored with the entries it appends.
   * Default: none.
   */
  telemetry?: ConsumerTelemetry;
}

const silent: ServiceLog = { info() {}, warn() {} };

/**
 * Consumes ticket updates and appends each to the batch stream of every
 * session subscribed to its ticket, exactly once: the batch store records the
 * consumed offset in the same atomic write as the entries, and the bus resumes
 * each partition from there (`resumeFrom`).
 *
 * A record that is not a valid TicketUpdate (poison) is logged with its
 * position and skipped (its offset recorded), never retried and never a crash.
 * A store failure rejects the batch: the bus delivers it again, and the offset
 * check drops what was already applied.
 */
export class StepContextService {
  readonly #deps: StepContextServiceDeps;
  readonly #log: ServiceLog;
  #subscription: BusSubscription | undefined;

  constructor(deps: StepContextServiceDeps) {
    this.#deps = deps;
    this.#log = deps.log ?? silent;
  }

  /** Joins the consumer group; resolves once the first assignment is in place. */
  async start(): Promise<void> {
    if (this.#subscription) return;
    const { batches } = this.#deps;
    this.#subscription = await this.#deps.subscriber.subscribe({
      topic: this.#deps.topic ?? TOPICS.ticketUpdates,
      groupId: this.#deps.groupId ?? STEP_CONTEXT_GROUP,
      handle: (records) => this.handle(records),
      resumeFrom: (topic, partition) => batches.resumeFrom(topic, partition),
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
    for (const record of records) await this.#apply(record);
  }

  async #apply(record: IncomingRecord): Promise<void> {
    const telemetry = this.#deps.telemetry ?? noopConsumerTelemetry;
    await telemetry.withSpan(
      SPAN_STEP_CONTEXT_APPLY,
      { [ATTR_TOPIC]: record.topic, [ATTR_PARTITION]: record.partition },
      (span) => this.#applyTraced(record, span),
      { kind: 'consumer', parentHeaders: record.headers },
    );
  }

  async #applyTraced(record: IncomingRecord, span: SpanHandle): Promise<void> {
    const position = { topic: record.topic, partition: record.partition, offset: record.offset };
    const where = { ...position, key: record.key, recordId: record.headers[RECORD_ID_HEADER] };
    let value: unknown;
    try {
      value = JSON.parse(record.value);
    } catch (err) {
      this.#log.warn({ ...where, reason: (err as Error).message }, 'ticket update skipped: not JSON');
      await this.#deps.batches.recordOffset(position);
      return;
    }
    const parsed = ticketUpdateSchema.safeParse(value);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => `${i.path.join('.') || 'record'}: ${i.message}`);
      this.#log.warn({ ...where, issues }, 'ticket update skipped: not a valid TicketUpdate');
      await this.#deps.batches.recordOffset(position);
      return;
    }
    const update = parsed.data;
    span.setAttributes({
      [ATTR_TICKET]: update.ticket,
      [ATTR_FEED_SOURCE]: update.source,
      [ATTR_FEED_EVENT_ID]: update.id,
    });
    const sessions = await this.#deps.subscriptions.sessionsFor(update);
    const traceparent = span.traceparent;
    const result = await this.#deps.batches.applyUpdate(update, sessions, position, traceparent ? { traceparent } : {});
    if (!result.applied) return; // consumed before: the atomic offset check dropped it
    const appended = Object.values(result.sessions).filter((o) => o.outcome === 'appended').length;
    this.#log.info({ ...where, updateId: update.id, sessions: sessions.length, appended }, 'ticket update applied');
  }
}
