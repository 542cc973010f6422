import {
  ATTR_CACHED_TOKENS,
  ATTR_CONSUMER_GROUP,
  ATTR_DLQ_REASON,
  ATTR_OFFSET_MISMATCH,
  ATTR_OFFSET_RESET,
  ATTR_PARTITION,
  ATTR_PREDICTED_TOKENS,
  ATTR_PROVIDER_FORMAT,
  ATTR_ROW_COUNT,
  ATTR_ROW_KIND,
  ATTR_ROW_SOURCE,
  ATTR_SESSION_ID,
  ATTR_SKIP_MESSAGE,
  ATTR_SKIP_REASON,
  ATTR_STEP_ID,
  ATTR_STEP_MODE,
  ATTR_TENANT,
  ATTR_TOPIC,
  EVENT_CONTEXT_SKIPPED,
  EVENT_PROVIDER_CACHE_SHORTFALL,
  extractTraceContext,
  INSTRUMENTATION_SCOPE,
  lazy,
  linksTo,
  METRIC_CONSUMER_LAG,
  METRIC_CONTEXT_PASS_DURATION,
  METRIC_CONTEXT_ROWS,
  METRIC_CONTEXT_SKIPPED,
  METRIC_DEAD_LETTERS,
  METRIC_OFFSET_MISMATCHES,
  METRIC_PREFIX_REUSE_RATIO,
  METRIC_PREFIX_REUSED_BYTES,
  METRIC_PROVIDER_CACHE_SHORTFALLS,
  METRIC_PROVIDER_CACHED_TOKENS,
  METRIC_PROVIDER_INPUT_TOKENS,
  METRIC_PROVIDER_PREDICTED_TOKENS,
  meterOf,
  noopSpan,
  SPAN_CONTEXT_DELIVER,
  SPAN_CONTEXT_PASS,
  SPAN_STORE_COMMIT,
  type SpanRunner,
  spanRunner,
  type TelemetryHandles,
  TRACEPARENT_HEADER,
} from '@ctxflow/telemetry';
import { type Attributes, logs, SeverityNumber, SpanKind, trace } from '@opentelemetry/api';
import type { ConsumerLag } from '../step-request-consumer.ts';

/*
 * The session-runner's telemetry on OpenTelemetry: what a context pass
 * reports (RunnerTelemetry: the `core.context.skipped` event, row and prefix
 * metrics, the pass and commit spans, delivery spans in the updates' traces),
 * and the step-request consumer's lag. Names from @ctxflow/telemetry.
 */

/** What the session-runner reports about context passes. */
export interface ContextTelemetry extends SpanRunner {
  /**
   * The stepContext hook (threw, timed out, returned an invalid result) or a
   * memory recall (too large) was skipped. Emits exactly one log record with
   * eventName `core.context.skipped`, severity WARN, body `message`, attributes
   * `ctxflow.session_id`, `ctxflow.step_id`, `ctxflow.skip.reason`,
   * `ctxflow.skip.message`; adds 1 to `ctxflow.context.skipped` by reason.
   * `reason` is one of SKIP_REASONS. Never throws.
   */
  contextSkipped(e: { sessionId: string; stepId: string; reason: string; message: string }): void;
  /**
   * A context pass committed. Adds one per row to `ctxflow.context.rows` by
   * kind and source (an empty `rows` adds nothing); records `durationMs` (ms)
   * in `ctxflow.context_pass.duration`, `prefixReusedBytes` in
   * `ctxflow.prompt.prefix_reused_bytes` and, when `requestBytes` > 0,
   * `prefixReusedBytes / requestBytes` in `ctxflow.prompt.prefix_reuse_ratio`,
   * all three by mode. `requestBytes` is the size of the whole model request,
   * `prefixReusedBytes` how many of its leading bytes equal the previous
   * request's. Never throws.
   */
  stepCommitted(e: {
    sessionId: string;
    stepId: string;
    mode: string;
    rows: { kind: string; source: string }[];
    durationMs: number;
    requestBytes: number;
    prefixReusedBytes: number;
  }): void;
  /**
   * A step's provider usage was recorded. Adds `inputTokens` to `ctxflow.provider.input_tokens`,
   * `cachedTokens` to `ctxflow.provider.cached_tokens` and `predictedTokens` (when not null) to
   * `ctxflow.provider.predicted_tokens`, by tenant and format; on a `shortfall`, adds 1 to
   * `ctxflow.provider.cache_shortfalls` and emits one log record with eventName
   * `core.provider_cache.shortfall`, severity WARN, attributes session id, step id, tenant,
   * format, cached and predicted tokens. Never throws.
   */
  providerUsage(e: {
    tenant: string;
    sessionId: string;
    stepId: string;
    format: string;
    inputTokens: number;
    cachedTokens: number;
    predictedTokens: number | null;
    shortfall: boolean;
  }): void;
  /**
   * Runs one context pass inside a `ctxflow.context_pass` span (attributes
   * session id and mode). `pass.link` links it to the traces of the ticket
   * updates its hook batch carried; `pass.step` names the step once known.
   */
  contextPass<T>(e: { sessionId: string; mode: string }, fn: (pass: PassSpan) => Promise<T>): Promise<T>;
  /** Runs the one atomic store commit of a pass inside a `ctxflow.store.commit` span. */
  storeCommit<T>(e: { sessionId: string; rowCount: number }, fn: () => Promise<T>): Promise<T>;
}

/** What a context pass tells its span. */
export interface PassSpan {
  /** W3C traceparents of the updates in the hook batch (opaque strings; invalid ones ignored). */
  link(traceparents: readonly string[]): void;
  /** The step this attempt commits (a pass that retries after a conflict names each attempt's step). */
  step(stepId: string): void;
}

const noopPass: PassSpan = { link() {}, step() {} };

export const noopContextTelemetry: ContextTelemetry = {
  contextSkipped() {},
  stepCommitted() {},
  providerUsage() {},
  withSpan: noopSpan,
  contextPass: (_e, fn) => fn(noopPass),
  storeCommit: (_e, fn) => fn(),
};

/** Bucket boundaries in bytes for reused prefixes: 1 KiB to 4 MiB. */
const BYTES_BUCKETS = [0, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304];
/** Bucket boundaries for a 0..1 ratio. */
const RATIO_BUCKETS = [0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1];
/** Bucket boundaries in ms for a context pass (hook timeout defaults to 5 s). */
const DURATION_BUCKETS = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000];

/** Delivery spans per pass at most (a batch can carry many updates). */
const MAX_DELIVER_SPANS = 32;

export function createContextTelemetry(handles: TelemetryHandles = {}): ContextTelemetry {
  const meter = meterOf(handles);
  const withSpan = spanRunner(handles);
  const tracer = lazy(() => handles.tracer ?? trace.getTracer(INSTRUMENTATION_SCOPE));
  const logger = lazy(() => handles.logger ?? logs.getLogger(INSTRUMENTATION_SCOPE));
  const instruments = lazy(() => {
    const m = meter();
    return {
      skipped: m.createCounter(METRIC_CONTEXT_SKIPPED, {
        description: 'stepContext hook calls and memory recalls skipped, by reason',
        unit: '{skip}',
      }),
      rows: m.createCounter(METRIC_CONTEXT_ROWS, {
        description: 'Context rows committed, by kind and source',
        unit: '{row}',
      }),
      duration: m.createHistogram(METRIC_CONTEXT_PASS_DURATION, {
        description: 'Duration of one context pass up to its commit',
        unit: 'ms',
        advice: { explicitBucketBoundaries: DURATION_BUCKETS },
      }),
      reusedBytes: m.createHistogram(METRIC_PREFIX_REUSED_BYTES, {
        description: 'Leading bytes of the model request identical to the previous request',
        unit: 'By',
        advice: { explicitBucketBoundaries: BYTES_BUCKETS },
      }),
      reuseRatio: m.createHistogram(METRIC_PREFIX_REUSE_RATIO, {
        description: 'Reused prefix bytes divided by request bytes',
        unit: '1',
        advice: { explicitBucketBoundaries: RATIO_BUCKETS },
      }),
      inputTokens: m.createCounter(METRIC_PROVIDER_INPUT_TOKENS, {
        description: 'Input tokens of model requests as the providers reported them, by tenant and format',
        unit: '{token}',
      }),
      cachedTokens: m.createCounter(METRIC_PROVIDER_CACHED_TOKENS, {
        description: 'Input tokens the providers read from their prompt caches, by tenant and format',
        unit: '{token}',
      }),
      predictedTokens: m.createCounter(METRIC_PROVIDER_PREDICTED_TOKENS, {
        description: "Input tokens the steps' unchanged prefixes predicted cached, by tenant and format",
        unit: '{token}',
      }),
      shortfalls: m.createCounter(METRIC_PROVIDER_CACHE_SHORTFALLS, {
        description: 'Steps whose provider cached less than their unchanged prefix predicted, by tenant and format',
        unit: '{step}',
      }),
    };
  });

  return {
    contextSkipped(e) {
      const attributes: Attributes = {
        [ATTR_SESSION_ID]: e.sessionId,
        [ATTR_STEP_ID]: e.stepId,
        [ATTR_SKIP_REASON]: e.reason,
        [ATTR_SKIP_MESSAGE]: e.message,
      };
      logger().emit({
        eventName: EVENT_CONTEXT_SKIPPED,
        severityNumber: SeverityNumber.WARN,
        severityText: 'WARN',
        body: e.message,
        attributes,
      });
      instruments().skipped.add(1, { [ATTR_SKIP_REASON]: e.reason });
    },

    stepCommitted(e) {
      const i = instruments();
      const counts = new Map<string, { kind: string; source: string; n: number }>();
      for (const row of e.rows) {
        const key = `${row.kind}\u0000${row.source}`;
        const entry = counts.get(key);
        if (entry) entry.n += 1;
        else counts.set(key, { kind: row.kind, source: row.source, n: 1 });
      }
      for (const { kind, source, n } of counts.values()) {
        i.rows.add(n, { [ATTR_ROW_KIND]: kind, [ATTR_ROW_SOURCE]: source });
      }
      const byMode = { [ATTR_STEP_MODE]: e.mode };
      i.duration.record(e.durationMs, byMode);
      i.reusedBytes.record(e.prefixReusedBytes, byMode);
      if (e.requestBytes > 0) i.reuseRatio.record(e.prefixReusedBytes / e.requestBytes, byMode);
    },

    providerUsage(e) {
      const i = instruments();
      const by = { [ATTR_TENANT]: e.tenant, [ATTR_PROVIDER_FORMAT]: e.format };
      i.inputTokens.add(e.inputTokens, by);
      i.cachedTokens.add(e.cachedTokens, by);
      if (e.predictedTokens !== null) i.predictedTokens.add(e.predictedTokens, by);
      if (!e.shortfall) return;
      i.shortfalls.add(1, by);
      const attributes: Attributes = {
        [ATTR_SESSION_ID]: e.sessionId,
        [ATTR_STEP_ID]: e.stepId,
        ...by,
        [ATTR_CACHED_TOKENS]: e.cachedTokens,
        ...(e.predictedTokens !== null ? { [ATTR_PREDICTED_TOKENS]: e.predictedTokens } : {}),
      };
      logger().emit({
        eventName: EVENT_PROVIDER_CACHE_SHORTFALL,
        severityNumber: SeverityNumber.WARN,
        severityText: 'WARN',
        body: `the provider cached ${e.cachedTokens} input tokens of the ${e.predictedTokens} the unchanged prefix predicted`,
        attributes,
      });
    },

    withSpan: withSpan,

    contextPass(e, fn) {
      return withSpan(SPAN_CONTEXT_PASS, { [ATTR_SESSION_ID]: e.sessionId, [ATTR_STEP_MODE]: e.mode }, (span) =>
        fn({
          link: (traceparents) => {
            // Fan-in: the pass links to every update it delivers ...
            span.link(traceparents);
            // ... and each update's own trace gets a delivery span, linked back to the pass.
            const back = span.traceparent ? linksTo([span.traceparent]) : [];
            for (const traceparent of traceparents.slice(0, MAX_DELIVER_SPANS)) {
              const remote = extractTraceContext({ [TRACEPARENT_HEADER]: traceparent });
              if (!trace.getSpanContext(remote)) continue;
              tracer()
                .startSpan(
                  SPAN_CONTEXT_DELIVER,
                  {
                    kind: SpanKind.CONSUMER,
                    attributes: { [ATTR_SESSION_ID]: e.sessionId },
                    ...(back.length > 0 ? { links: back } : {}),
                  },
                  remote,
                )
                .end();
            }
          },
          step: (id) => span.setAttributes({ [ATTR_STEP_ID]: id }),
        }),
      );
    },

    storeCommit(e, fn) {
      return withSpan(SPAN_STORE_COMMIT, { [ATTR_SESSION_ID]: e.sessionId, [ATTR_ROW_COUNT]: e.rowCount }, () => fn());
    },
  };
}

/** The step-request consumer's `ctxflow.consumer.lag` gauge, dead-letter and offset-mismatch counters on the meter of `handles` (else the global one). */
export function createConsumerLag(handles: Pick<TelemetryHandles, 'meter'> = {}): ConsumerLag {
  const meter = meterOf(handles);
  const gauge = lazy(() =>
    meter().createGauge(METRIC_CONSUMER_LAG, {
      description: 'Records between the committed offset and the end of the partition',
      unit: '{record}',
    }),
  );
  const deadLetters = lazy(() =>
    meter().createCounter(METRIC_DEAD_LETTERS, {
      description: 'Consumed records published onto a dead-letter topic',
      unit: '{record}',
    }),
  );
  const offsetMismatches = lazy(() =>
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
  };
}
