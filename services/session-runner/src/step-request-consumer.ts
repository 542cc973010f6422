import type { IncomingRecord, OffsetResetPolicy, Publisher, Subscriber, Subscription } from '@ctxflow/bus';
import {
  type DeadLetterReason,
  deadLetterOf,
  isCtxflowError,
  RECORD_ID_HEADER,
  stepRequestRecordSchema,
  TOPICS,
} from '@ctxflow/contracts';
import { withRemoteParent } from '@ctxflow/telemetry';
import { MemoryTopicIdRecord } from './adapters/memory-topic-id-record.ts';
import { CommittedOffsetGuard } from './committed-offset-guard.ts';
import type { ContextEngine } from './domain/context-engine.ts';
import type { SessionStore } from './ports/session-store.ts';
import type { TopicIdRecord } from './ports/topic-id-record.ts';

export const STEP_CONSUMER_GROUP = 'ctxflow-session-runner';

export interface StepRequestConsumerDeps {
  engine: ContextEngine;
  store: SessionStore;
  subscriber: Subscriber;
  publisher: Publisher;
  log?: { warn(obj: object, msg: string): void; error(obj: object, msg: string): void };
  /** Default STEP_CONSUMER_GROUP. */
  groupId?: string;
  /**
   * What an assignment does with a committed offset that does not fit the partition's log
   * (committed-offset-guard.ts; `CTXFLOW_OFFSET_RESET`). Default `earliest`.
   */
  offsetReset?: OffsetResetPolicy;
  /**
   * Where the guard records the topic id each partition was begun in, for commits that name
   * none (ports/topic-id-record.ts). Default: one in this process (MemoryTopicIdRecord).
   */
  topicIds?: TopicIdRecord;
  /** Reports the consumer lag after each handled batch (`ctxflow.consumer.lag`) and dead letters. Default: none. */
  telemetry?: ConsumerLag;
  /**
   * Where a request that cannot be run goes (see startStepRequestConsumer).
   * Default: `publisher`, to TOPICS.stepRequestsDlq.
   */
  deadLetterTopic?: string;
}

/** How far the consumer is behind (createConsumerLag reports it as the gauge `ctxflow.consumer.lag`). */
export interface ConsumerLag {
  /** Records between the committed offset and the partition's end. */
  lag(e: { group: string; topic: string; partition: number; lag: number }): void;
  /** One record the dead-letter topic acknowledged (`ctxflow.consumer.dead_letters`, by group, topic and reason). */
  deadLettered?(e: { group: string; topic: string; reason: string }): void;
  /** One assignment whose committed offset did not fit the partition's log (`ctxflow.consumer.offset_mismatches`). */
  offsetMismatch?(e: { group: string; topic: string; partition: number; mismatch: string; reset: string }): void;
}

/**
 * A step result on TOPICS.stepResults, keyed by session id: the HTTP step answer
 * plus the request it answers, or a refusal. A redelivered request publishes
 * the same stepId again (the commit happened once); consumers keep the first.
 */
export type StepResultRecord =
  | ({ requestId: string; sessionId: string; ok: true } & Awaited<ReturnType<ContextEngine['step']>>)
  | { requestId: string; sessionId: string; ok: false; error: { code: string; message: string; retryable: boolean } };

/**
 * Consumes step requests (`{ sessionId, requestId, mode }`, keyed by session so
 * one session's steps stay ordered on one consumer), runs the context pass and
 * publishes the result. The step's commit records `requestId`, so a request
 * redelivered after a crash between commit and offset commit commits nothing
 * new and answers the same step.
 *
 * A record that is not JSON (`not_json`), not a valid request (`invalid`), or
 * whose step fails with a non-retryable error (`failed`; its refusal is
 * published on TOPICS.stepResults too) is published onto the dead-letter
 * topic with its reason and position; the handler resolves (and the bus
 * commits the offset) only once that publish is acknowledged. A failed
 * dead-letter publish rejects the batch: the bus delivers it again.
 *
 * At every assignment the group's committed offset is checked against the
 * partition's log (CommittedOffsetGuard): one committed in a topic since
 * deleted (named by the commit, or by the topic id record for a client whose
 * commits name none), or past the log's end, is an error line, a count and a reset.
 */
export async function startStepRequestConsumer(deps: StepRequestConsumerDeps): Promise<Subscription> {
  const groupId = deps.groupId ?? STEP_CONSUMER_GROUP;
  const deadLetter = async (record: IncomingRecord, reason: DeadLetterReason, error: string) => {
    deps.log?.warn({ offset: record.offset, partition: record.partition, reason, error }, 'step request dead-lettered');
    await deps.publisher.publish(deps.deadLetterTopic ?? TOPICS.stepRequestsDlq, [deadLetterOf(record, reason, error)]);
    deps.telemetry?.deadLettered?.({ group: groupId, topic: record.topic, reason });
  };
  const handleOne = async (record: IncomingRecord) => {
    let raw: unknown;
    try {
      raw = JSON.parse(record.value);
    } catch (err) {
      await deadLetter(record, 'not_json', (err as Error).message);
      return;
    }
    // A tolerant reader: fields this version does not know are accepted (a producer may add one).
    const parsed = stepRequestRecordSchema.safeParse(raw);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => `${i.path.join('.') || 'record'}: ${i.message}`);
      await deadLetter(record, 'invalid', issues.join('; '));
      return;
    }
    const request = parsed.data;
    let result: StepResultRecord;
    let failed: string | undefined;
    try {
      const tenant = request.tenant ?? (await deps.store.getMeta(request.sessionId))?.tenant ?? '';
      const step = await deps.engine.step(tenant, request.sessionId, {
        mode: request.mode,
        requestId: request.requestId,
        ...(request.format === undefined ? {} : { format: request.format }),
        ...(request.since === undefined ? {} : { since: request.since }),
      });
      result = { requestId: request.requestId, sessionId: request.sessionId, ok: true, ...step };
    } catch (err) {
      if (!isCtxflowError(err) || err.retryable) throw err; // redelivered: the bus retries
      failed = `${err.code}: ${err.message}`;
      result = {
        requestId: request.requestId,
        sessionId: request.sessionId,
        ok: false,
        error: { code: err.code, message: err.message, retryable: err.retryable },
      };
    }
    await deps.publisher.publish(TOPICS.stepResults, [
      { key: request.sessionId, value: JSON.stringify(result), headers: { [RECORD_ID_HEADER]: request.requestId } },
    ]);
    if (failed !== undefined) await deadLetter(record, 'failed', failed);
  };
  const guard = new CommittedOffsetGuard({
    group: groupId,
    ...(deps.offsetReset === undefined ? {} : { policy: deps.offsetReset }),
    ...(deps.log === undefined ? {} : { log: deps.log }),
    topicIds: deps.topicIds ?? new MemoryTopicIdRecord(),
    mismatched: (e) => deps.telemetry?.offsetMismatch?.(e),
  });
  const subscription = await deps.subscriber.subscribe({
    topic: TOPICS.stepRequests,
    groupId,
    resumeFrom: (topic, partition, log, committed) => guard.resumeFrom(topic, partition, log, committed),
    async handle(records) {
      // A request sent with a traceparent header makes its context pass part of the sender's trace.
      for (const record of records) await withRemoteParent(record.headers, () => handleOne(record));
      const last = records[records.length - 1];
      if (last?.highWatermark && deps.telemetry) {
        const lag = BigInt(last.highWatermark) - BigInt(last.offset) - 1n;
        deps.telemetry.lag({
          group: groupId,
          topic: last.topic,
          partition: last.partition,
          lag: Number(lag < 0n ? 0n : lag),
        });
      }
    },
  });
  return subscription;
}
