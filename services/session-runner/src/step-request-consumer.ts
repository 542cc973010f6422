import type { IncomingRecord, Publisher, Subscriber, Subscription } from '@ctxflow/bus';
import { isCtxflowError, stepRequestSchema, TOPICS } from '@ctxflow/contracts';
import { withRemoteParent } from '@ctxflow/telemetry';
import type { ContextEngine } from './domain/context-engine.ts';
import type { SessionStore } from './ports/session-store.ts';

export const STEP_CONSUMER_GROUP = 'ctxflow-session-runner';

export interface StepRequestConsumerDeps {
  engine: ContextEngine;
  store: SessionStore;
  subscriber: Subscriber;
  publisher: Publisher;
  log?: { warn(obj: object, msg: string): void };
  /** Default STEP_CONSUMER_GROUP. */
  groupId?: string;
  /** Reports the consumer lag after each handled batch (`ctxflow.consumer.lag`). Default: none. */
  telemetry?: ConsumerLag;
}

/** How far the consumer is behind (createConsumerLag reports it as the gauge `ctxflow.consumer.lag`). */
export interface ConsumerLag {
  /** Records between the committed offset and the partition's end. */
  lag(e: { group: string; topic: string; partition: number; lag: number }): void;
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
 */
export async function startStepRequestConsumer(deps: StepRequestConsumerDeps): Promise<Subscription> {
  const handleOne = async (record: IncomingRecord) => {
    let raw: unknown;
    try {
      raw = JSON.parse(record.value);
    } catch {
      deps.log?.warn({ offset: record.offset, partition: record.partition }, 'step request is not JSON: skipped');
      return;
    }
    const parsed = stepRequestSchema.safeParse(raw);
    if (!parsed.success) {
      deps.log?.warn({ offset: record.offset, partition: record.partition }, 'invalid step request: skipped');
      return;
    }
    const request = parsed.data;
    let result: StepResultRecord;
    try {
      const tenant = request.tenant ?? (await deps.store.getMeta(request.sessionId))?.tenant ?? '';
      const step = await deps.engine.step(tenant, request.sessionId, {
        mode: request.mode,
        requestId: request.requestId,
        ...(request.format === undefined ? {} : { format: request.format }),
      });
      result = { requestId: request.requestId, sessionId: request.sessionId, ok: true, ...step };
    } catch (err) {
      if (!isCtxflowError(err) || err.retryable) throw err; // redelivered: the bus retries
      result = {
        requestId: request.requestId,
        sessionId: request.sessionId,
        ok: false,
        error: { code: err.code, message: err.message, retryable: err.retryable },
      };
    }
    await deps.publisher.publish(TOPICS.stepResults, [
      { key: request.sessionId, value: JSON.stringify(result), headers: { 'ctxflow-record-id': request.requestId } },
    ]);
  };
  const groupId = deps.groupId ?? STEP_CONSUMER_GROUP;
  const subscription = await deps.subscriber.subscribe({
    topic: TOPICS.stepRequests,
    groupId,
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
