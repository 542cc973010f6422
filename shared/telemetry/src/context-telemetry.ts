import {
  type Attributes,
  type Context,
  context,
  type Gauge,
  type Logger,
  logs,
  type Meter,
  metrics,
  type SpanOptions as OtelSpanOptions,
  SeverityNumber,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import {
  ATTR_CONSUMER_GROUP,
  ATTR_FEED_REASON,
  ATTR_FEED_SOURCE,
  ATTR_PARTITION,
  ATTR_ROW_COUNT,
  ATTR_ROW_KIND,
  ATTR_ROW_SOURCE,
  ATTR_SESSION_ID,
  ATTR_SKIP_MESSAGE,
  ATTR_SKIP_REASON,
  ATTR_STEP_ID,
  ATTR_STEP_MODE,
  ATTR_TOPIC,
  EVENT_CONTEXT_SKIPPED,
  INSTRUMENTATION_SCOPE,
  METRIC_CONSUMER_LAG,
  METRIC_CONTEXT_PASS_DURATION,
  METRIC_CONTEXT_ROWS,
  METRIC_CONTEXT_SKIPPED,
  METRIC_FEED_INGESTED,
  METRIC_FEED_REFUSED,
  METRIC_PREFIX_REUSE_RATIO,
  METRIC_PREFIX_REUSED_BYTES,
  SPAN_CONTEXT_DELIVER,
  SPAN_CONTEXT_PASS,
  SPAN_STORE_COMMIT,
} from './names.ts';
import { extractTraceContext, type HeaderBag, linksTo, TRACEPARENT_HEADER } from './trace-context.ts';

/** Attribute values a span accepts. */
export type SpanAttributes = Record<string, string | number | boolean>;

/** The role of a span in a conversation between processes (OpenTelemetry SpanKind). */
export type SpanRole = 'internal' | 'server' | 'client' | 'producer' | 'consumer';

/** Where a span sits and what it points at; every field optional. */
export interface SpanOptions {
  /** Default `internal`. A webhook is `server`, a publish `producer`, a record handled `consumer`. */
  kind?: SpanRole;
  /**
   * Headers carrying a remote parent (`traceparent`, `tracestate`): HTTP
   * request headers or Kafka record headers. When they name a valid parent the
   * span is its child; otherwise the span is a child of the active span.
   */
  parentHeaders?: HeaderBag;
  /** W3C traceparents this span is linked to (fan-in), invalid ones ignored. */
  links?: readonly string[];
}

/** The running span as the work inside it sees it. */
export interface SpanHandle {
  /** This span's `traceparent`, to store or send with the work it produced; undefined when not recorded. */
  readonly traceparent: string | undefined;
  /** Adds W3C traceparents as links (invalid ones ignored). */
  link(traceparents: readonly string[]): void;
  setAttributes(attributes: SpanAttributes): void;
}

/**
 * A span started by {@link ConsumerTelemetry.startSpan}: never the active
 * span, ended by whoever started it. For work that handles many records in one
 * go, one span per record without a context switch or a promise each.
 */
export interface StartedSpan extends SpanHandle {
  /**
   * `trace_id` and `span_id` of this span, for a log line written outside its
   * context (pino's mixin adds them only for the active span); an empty object
   * when the span is not recorded. What `traceLogFields(traceparent)` gives,
   * without formatting and parsing the traceparent.
   */
  logFields(): { trace_id?: string; span_id?: string };
  /**
   * Ends the span now; with `error`, records it first (exception event,
   * status ERROR), as `withSpan` does for a rejection.
   */
  end(error?: unknown): void;
}

/** Runs work inside a span. */
export interface SpanRunner {
  /**
   * Runs `fn` inside a span named `name` (one of the `SPAN_*` names) carrying
   * `attributes`; the span is the active one while `fn` runs, so spans and log
   * records started inside it become its children. The span ends when `fn`
   * settles; a rejection is recorded on the span (status ERROR) and rethrown
   * unchanged. Resolves to what `fn` resolves to.
   */
  withSpan<T>(
    name: string,
    attributes: SpanAttributes,
    fn: (span: SpanHandle) => Promise<T>,
    options?: SpanOptions,
  ): Promise<T>;
}

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

/** What the feed-ingestor reports about webhook deliveries. */
export interface FeedTelemetry extends SpanRunner {
  /** A ticket update was accepted and published (duplicates included: they are accepted). Adds 1 to `ctxflow.feed.ingested` by source. */
  ingested(e: { source: string }): void;
  /** A delivery was refused (bad signature, bad body, stale timestamp...). Adds 1 to `ctxflow.feed.refused` by source and reason (an error code). */
  refused(e: { source: string; reason: string }): void;
}

/** What a Kafka consumer reports: its spans (one per record handled) and how far behind it is. */
export interface ConsumerTelemetry extends SpanRunner {
  /** Records `lag` (records between the committed offset and the partition's end) in the gauge `ctxflow.consumer.lag`. */
  lag(e: { group: string; topic: string; partition: number; lag: number }): void;
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

/** OpenTelemetry API handles; each defaults to the global one of scope `ctxflow`. */
export interface TelemetryHandles {
  meter?: Meter;
  logger?: Logger;
  tracer?: Tracer;
}

const noopHandle: SpanHandle = { traceparent: undefined, link() {}, setAttributes() {} };
const noopStarted: StartedSpan = {
  traceparent: undefined,
  link() {},
  setAttributes() {},
  logFields: () => ({}),
  end() {},
};
const noopPass: PassSpan = { link() {}, step() {} };

async function noopSpan<T>(
  _name: string,
  _attributes: SpanAttributes,
  fn: (span: SpanHandle) => Promise<T>,
): Promise<T> {
  return fn(noopHandle);
}

export const noopContextTelemetry: ContextTelemetry = {
  contextSkipped() {},
  stepCommitted() {},
  withSpan: noopSpan,
  contextPass: (_e, fn) => fn(noopPass),
  storeCommit: (_e, fn) => fn(),
};

export const noopFeedTelemetry: FeedTelemetry = {
  ingested() {},
  refused() {},
  withSpan: noopSpan,
};

export const noopConsumerTelemetry: ConsumerTelemetry = {
  lag() {},
  withSpan: noopSpan,
  startSpan: () => noopStarted,
};

/**
 * The global metrics API has no proxy: a meter taken before the global
 * provider is registered stays a no-op forever. Instruments are therefore
 * created on first use, so a telemetry object built before `startTelemetry`
 * still reports once it has run.
 */
function lazy<T>(make: () => T): () => T {
  let value: T | undefined;
  return () => {
    value ??= make();
    return value;
  };
}

function meterOf(handles: TelemetryHandles): () => Meter {
  return lazy(() => handles.meter ?? metrics.getMeter(INSTRUMENTATION_SCOPE));
}

const KINDS: Record<SpanRole, SpanKind> = {
  internal: SpanKind.INTERNAL,
  server: SpanKind.SERVER,
  client: SpanKind.CLIENT,
  producer: SpanKind.PRODUCER,
  consumer: SpanKind.CONSUMER,
};

/**
 * A span's `traceparent`, as the W3C propagator writes it for the span's
 * context (`00-<trace id>-<span id>-<flags>`), without building a context to
 * inject from.
 */
function formatTraceparent(spanContext: SpanContext): string {
  const flags = spanContext.traceFlags & 0xff;
  return `00-${spanContext.traceId}-${spanContext.spanId}-${flags < 16 ? '0' : ''}${flags.toString(16)}`;
}

/** Records `err` on `span`: an exception event and status ERROR with its message. */
function recordError(span: Span, err: unknown): void {
  const error = err instanceof Error ? err : new Error(String(err));
  span.recordException(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
}

/**
 * The handle of a running span (withSpan) or a started one (startSpan).
 * Whether the span is recorded is decided when it starts; its traceparent is
 * formatted on first read and kept.
 */
class Handle implements StartedSpan {
  readonly #span: Span;
  readonly #recorded: boolean;
  #traceparent: string | undefined;

  constructor(span: Span) {
    this.#span = span;
    this.#recorded = span.isRecording();
  }

  get traceparent(): string | undefined {
    if (!this.#recorded) return undefined;
    this.#traceparent ??= formatTraceparent(this.#span.spanContext());
    return this.#traceparent;
  }

  logFields(): { trace_id?: string; span_id?: string } {
    if (!this.#recorded) return {};
    const { traceId, spanId } = this.#span.spanContext();
    return { trace_id: traceId, span_id: spanId };
  }

  link(traceparents: readonly string[]): void {
    const links = linksTo(traceparents);
    if (links.length > 0) this.#span.addLinks(links);
  }

  setAttributes(attributes: SpanAttributes): void {
    this.#span.setAttributes(attributes);
  }

  end(error?: unknown): void {
    if (error !== undefined) recordError(this.#span, error);
    this.#span.end();
  }
}

/** The parent of a new span: the remote one named by `parentHeaders` when valid, else the active context. */
function parentOf(options: SpanOptions): Context {
  if (options.parentHeaders) {
    const remote = extractTraceContext(options.parentHeaders);
    if (trace.getSpanContext(remote)) return remote;
  }
  return context.active();
}

/** The SDK's options for a span of `attributes` (none: set later) placed by `options`. */
function startOptions(attributes: SpanAttributes | undefined, options: SpanOptions): OtelSpanOptions {
  const kind = KINDS[options.kind ?? 'internal'];
  const links = options.links ? linksTo(options.links) : [];
  const placed: OtelSpanOptions = links.length > 0 ? { kind, links } : { kind };
  if (attributes !== undefined) placed.attributes = attributes;
  return placed;
}

function spanRunner(handles: TelemetryHandles): SpanRunner['withSpan'] {
  const tracer = lazy(() => handles.tracer ?? trace.getTracer(INSTRUMENTATION_SCOPE));
  return (name, attributes, fn, options = {}) =>
    tracer().startActiveSpan(name, startOptions(attributes, options), parentOf(options), async (span) => {
      try {
        return await fn(new Handle(span));
      } catch (err) {
        recordError(span, err);
        throw err;
      } finally {
        span.end();
      }
    });
}

function spanStarter(handles: Pick<TelemetryHandles, 'tracer'>): ConsumerTelemetry['startSpan'] {
  const tracer = lazy(() => handles.tracer ?? trace.getTracer(INSTRUMENTATION_SCOPE));
  return (name, attributes, options = {}) => {
    // The samplers decide on the parent and the trace id alone: attributes are built only for a span that
    // records (under the parent-based sampler, one whose record's traceparent was sampled).
    const span = tracer().startSpan(name, startOptions(undefined, options), parentOf(options));
    if (span.isRecording()) span.setAttributes(typeof attributes === 'function' ? attributes() : attributes);
    return new Handle(span);
  };
}

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

export function createFeedTelemetry(handles: TelemetryHandles = {}): FeedTelemetry {
  const meter = meterOf(handles);
  const instruments = lazy(() => {
    const m = meter();
    return {
      ingested: m.createCounter(METRIC_FEED_INGESTED, {
        description: 'Ticket updates accepted and published, by source',
        unit: '{update}',
      }),
      refused: m.createCounter(METRIC_FEED_REFUSED, {
        description: 'Feed deliveries refused, by source and reason',
        unit: '{update}',
      }),
    };
  });
  return {
    ingested(e) {
      instruments().ingested.add(1, { [ATTR_FEED_SOURCE]: e.source });
    },
    refused(e) {
      instruments().refused.add(1, { [ATTR_FEED_SOURCE]: e.source, [ATTR_FEED_REASON]: e.reason });
    },
    withSpan: spanRunner(handles),
  };
}

export function createConsumerTelemetry(handles: Pick<TelemetryHandles, 'meter' | 'tracer'> = {}): ConsumerTelemetry {
  const meter = meterOf(handles);
  const gauge = lazy(
    (): Gauge =>
      meter().createGauge(METRIC_CONSUMER_LAG, {
        description: 'Records between the committed offset and the end of the partition',
        unit: '{record}',
      }),
  );
  return {
    lag(e) {
      gauge().record(e.lag, { [ATTR_CONSUMER_GROUP]: e.group, [ATTR_TOPIC]: e.topic, [ATTR_PARTITION]: e.partition });
    },
    withSpan: spanRunner(handles),
    startSpan: spanStarter(handles),
  };
}
