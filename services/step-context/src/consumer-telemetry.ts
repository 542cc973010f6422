import {
  ATTR_CONSUMER_GROUP,
  ATTR_DLQ_REASON,
  ATTR_OFFSET_MISMATCH,
  ATTR_OFFSET_RESET,
  ATTR_PARTITION,
  ATTR_TOPIC,
  lazy,
  METRIC_CONSUMER_LAG,
  METRIC_DEAD_LETTERS,
  METRIC_OFFSET_MISMATCHES,
  meterOf,
  noopSpan,
  noopStartedSpan,
  type SpanAttributes,
  type SpanOptions,
  type SpanRunner,
  type StartedSpan,
  spanRunner,
  spanStarter,
  type TelemetryHandles,
} from '@ctxflow/telemetry';
import type { Counter, Gauge } from '@opentelemetry/api';

/*
 * step-context's telemetry on OpenTelemetry: one CONSUMER apply span per
 * ticket-update record (OpenTelemetry's messaging conventions, a span per
 * message), child of the record's `traceparent`, the consumer-lag gauge, the
 * dead-letter counter and the offset-mismatch counter.
 */

/** What a Kafka consumer reports: its spans (one per record handled) and how far behind it is. */
export interface ConsumerTelemetry extends SpanRunner {
  /** Records `lag` (records between the committed offset and the partition's end) in the gauge `ctxflow.consumer.lag`. */
  lag(e: { group: string; topic: string; partition: number; lag: number }): void;
  /**
   * Adds 1 to the counter `ctxflow.consumer.dead_letters` (by group, source
   * topic and reason) for a record the dead-letter topic acknowledged.
   */
  deadLettered(e: { group: string; topic: string; reason: string }): void;
  /**
   * Adds 1 to the counter `ctxflow.consumer.offset_mismatches` (by group,
   * topic, partition, mismatch and reset policy) for an assignment whose
   * stored offset did not fit the partition's log (domain/offset-check.ts).
   */
  offsetMismatch(e: { group: string; topic: string; partition: number; mismatch: string; reset: string }): void;
  /**
   * Starts a span named `name` carrying `attributes`, placed as `withSpan`
   * places its span (`options`: kind, remote parent from headers, links), but
   * never made the active one: nothing runs inside it, so spans and log
   * records started meanwhile are not its children. The caller ends it with
   * `end`. This is the cheap form for a consumer that handles a run of
   * records together: one span per record, all ended once the run's write is
   * done. `attributes` may be a function: it is called only for a span that
   * records (a sampled one), so an unsampled record costs no attribute object.
   */
  startSpan(name: string, attributes: SpanAttributes | (() => SpanAttributes), options?: SpanOptions): StartedSpan;
}

export const noopConsumerTelemetry: ConsumerTelemetry = {
  lag() {},
  deadLettered() {},
  offsetMismatch() {},
  withSpan: noopSpan,
  startSpan: () => noopStartedSpan,
};

export function createConsumerTelemetry(handles: Pick<TelemetryHandles, 'meter' | 'tracer'> = {}): ConsumerTelemetry {
  const meter = meterOf(handles);
  const gauge = lazy(
    (): Gauge =>
      meter().createGauge(METRIC_CONSUMER_LAG, {
        description: 'Records between the committed offset and the end of the partition',
        unit: '{record}',
      }),
  );
  const deadLetters = lazy(
    (): Counter =>
      meter().createCounter(METRIC_DEAD_LETTERS, {
        description: 'Consumed records published onto a dead-letter topic',
        unit: '{record}',
      }),
  );
  const offsetMismatches = lazy(
    (): Counter =>
      meter().createCounter(METRIC_OFFSET_MISMATCHES, {
        description: "Assignments whose stored offset did not fit the partition's log",
        unit: '{partition}',
      }),
  );
  return {
    lag(e) {
      gauge().record(e.lag, { [ATTR_CONSUMER_GROUP]: e.group, [ATTR_TOPIC]: e.topic, [ATTR_PARTITION]: e.partition });
    },
    deadLettered(e) {
      deadLetters().add(1, { [ATTR_CONSUMER_GROUP]: e.group, [ATTR_TOPIC]: e.topic, [ATTR_DLQ_REASON]: e.reason });
    },
    offsetMismatch(e) {
      offsetMismatches().add(1, {
        [ATTR_CONSUMER_GROUP]: e.group,
        [ATTR_TOPIC]: e.topic,
        [ATTR_PARTITION]: e.partition,
        [ATTR_OFFSET_MISMATCH]: e.mismatch,
        [ATTR_OFFSET_RESET]: e.reset,
      });
    },
    withSpan: spanRunner(handles),
    startSpan: spanStarter(handles),
  };
}
