import {
  type Context,
  context,
  type Logger,
  type Meter,
  metrics,
  type SpanOptions as OtelSpanOptions,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { INSTRUMENTATION_SCOPE } from './names.ts';
import { extractTraceContext, type HeaderBag, linksTo } from './trace-context.ts';

/*
 * Spans on the OpenTelemetry API for the services' own telemetry objects
 * (session-runner, feed-ingestor, step-context): run work inside a span, or
 * start one a consumer ends itself. Placement, links and errors as the SDK
 * records them; nothing here builds a span of its own.
 */

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

/**
 * Starts a span placed as `withSpan` places its span, never made the active
 * one; the caller ends it. `attributes` as a function is called only for a
 * span that records (a sampled one).
 */
export type SpanStarter = (
  name: string,
  attributes: SpanAttributes | (() => SpanAttributes),
  options?: SpanOptions,
) => StartedSpan;

/** OpenTelemetry API handles; each defaults to the global one of scope `ctxflow`. */
export interface TelemetryHandles {
  meter?: Meter;
  logger?: Logger;
  tracer?: Tracer;
}

const noopHandle: SpanHandle = { traceparent: undefined, link() {}, setAttributes() {} };

/** A started span that records nothing. */
export const noopStartedSpan: StartedSpan = {
  traceparent: undefined,
  link() {},
  setAttributes() {},
  logFields: () => ({}),
  end() {},
};

/** `withSpan` that runs `fn` with a handle that records nothing. */
export async function noopSpan<T>(
  _name: string,
  _attributes: SpanAttributes,
  fn: (span: SpanHandle) => Promise<T>,
): Promise<T> {
  return fn(noopHandle);
}

/**
 * The global metrics API has no proxy: a meter taken before the global
 * provider is registered stays a no-op forever. Instruments are therefore
 * created on first use, so a telemetry object built before `startTelemetry`
 * still reports once it has run.
 */
export function lazy<T>(make: () => T): () => T {
  let value: T | undefined;
  return () => {
    value ??= make();
    return value;
  };
}

/** The meter of `handles`, else the global one of scope `ctxflow`, taken on first use. */
export function meterOf(handles: TelemetryHandles): () => Meter {
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

/** `withSpan` on the tracer of `handles`, else the global one of scope `ctxflow` (taken on first use). */
export function spanRunner(handles: TelemetryHandles): SpanRunner['withSpan'] {
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

/**
 * Starts spans on the tracer of `handles` (else the global one), never made
 * active: see {@link SpanStarter}.
 */
export function spanStarter(handles: Pick<TelemetryHandles, 'tracer'>): SpanStarter {
  const tracer = lazy(() => handles.tracer ?? trace.getTracer(INSTRUMENTATION_SCOPE));
  return (name, attributes, options = {}) => {
    // The samplers decide on the parent and the trace id alone: attributes are built only for a span that
    // records (under the parent-based sampler, one whose record's traceparent was sampled).
    const span = tracer().startSpan(name, startOptions(undefined, options), parentOf(options));
    if (span.isRecording()) span.setAttributes(typeof attributes === 'function' ? attributes() : attributes);
    return new Handle(span);
  };
}
