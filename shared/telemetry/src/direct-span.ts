import {
  diag,
  type HrTime,
  type Link,
  type SpanContext,
  type SpanKind,
  SpanStatusCode,
  TraceFlags,
} from '@opentelemetry/api';
import {
  AddAttributeDecision,
  addHrTimes,
  cleanAttributes,
  cleanSimpleAttributes,
  hrTimeDuration,
  type InstrumentationScope,
  maybeAddAttribute,
  millisToHrTime,
} from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import type { ReadableSpan, SpanProcessor, TimedEvent } from '@opentelemetry/sdk-trace';
import type { SpanAttributes, StartedSpan } from './context-telemetry.ts';
import { linksTo } from './trace-context.ts';

/**
 * What startTelemetry lends for spans started without the SDK tracer: its
 * resource, the `ctxflow` tracer's instrumentation scope and its span
 * processor (undefined when traces are not exported).
 */
export interface DirectSpanTarget {
  resource: Resource;
  scope: InstrumentationScope;
  processor: SpanProcessor | undefined;
}

/** The SDK's defaults (startTelemetry sets no span limits). */
const ATTRIBUTE_COUNT_LIMIT = 128;
const EVENT_COUNT_LIMIT = 128;
const LINK_COUNT_LIMIT = 128;
const LIMITS = { attributeCountLimit: ATTRIBUTE_COUNT_LIMIT, attributeValueLengthLimit: Number.POSITIVE_INFINITY };

const NONE = Object.freeze([]) as unknown as unknown[];

/** A random span id as the SDK's RandomIdGenerator makes it: 16 hex digits, never all zero. */
function spanId(): string {
  const high = (Math.random() * 2 ** 32) >>> 0;
  const low = (Math.random() * 2 ** 32) >>> 0;
  if (high === 0 && low === 0) return '0000000000000001';
  return high.toString(16).padStart(8, '0') + low.toString(16).padStart(8, '0');
}

/**
 * A sampled span whose parent is a remote span that was sampled, made as the
 * SDK tracer makes it under startTelemetry's parent-based sampler (which
 * records and samples every such span), without the tracer: no context
 * object, no sampler call, no span-metrics bookkeeping. Same name, kind,
 * trace id, parent, flags, timestamps (start from the wall clock in ms, end
 * from the monotonic clock), attribute limits and validation, status and
 * exception events as the SDK's span; ending it hands it, as a ReadableSpan,
 * to the provider's span processor, as the SDK span does. It is its own
 * StartedSpan handle (ConsumerTelemetry.startSpan).
 */
export class DirectSpan implements ReadableSpan, StartedSpan {
  readonly name: string;
  readonly kind: SpanKind;
  readonly #context: SpanContext;
  readonly parentSpanContext: SpanContext;
  readonly startTime: HrTime;
  endTime: HrTime = [0, 0];
  duration: HrTime = [-1, -1];
  status: ReadableSpan['status'] = { code: SpanStatusCode.UNSET };
  attributes: ReadableSpan['attributes'] = {};
  /** Shared empty lists until a first link or event (most spans have none). */
  links: Link[] = NONE as Link[];
  events: TimedEvent[] = NONE as TimedEvent[];
  ended = false;
  readonly resource: Resource;
  readonly instrumentationScope: InstrumentationScope;
  droppedAttributesCount = 0;
  droppedEventsCount = 0;
  droppedLinksCount = 0;
  #attributeCount = 0;
  readonly #performanceStart: number;
  readonly #processor: SpanProcessor | undefined;
  #traceparent: string | undefined;

  constructor(target: DirectSpanTarget, name: string, kind: SpanKind, parent: SpanContext) {
    const now = Date.now();
    this.#performanceStart = performance.now();
    this.name = name;
    this.kind = kind;
    this.parentSpanContext = parent;
    this.#context = { traceId: parent.traceId, spanId: spanId(), traceFlags: TraceFlags.SAMPLED };
    this.startTime = millisToHrTime(now);
    this.resource = target.resource;
    this.instrumentationScope = target.scope;
    this.#processor = target.processor;
  }

  spanContext(): SpanContext {
    return this.#context;
  }

  /** `00-<trace id>-<span id>-01`: the span is sampled. */
  get traceparent(): string {
    this.#traceparent ??= `00-${this.#context.traceId}-${this.#context.spanId}-01`;
    return this.#traceparent;
  }

  logFields(): { trace_id: string; span_id: string } {
    return { trace_id: this.#context.traceId, span_id: this.#context.spanId };
  }

  link(traceparents: readonly string[]): void {
    const links = linksTo(traceparents);
    if (links.length > 0) this.addLinks(links);
  }

  /**
   * The attributes of a new span, from an object nobody else holds (the
   * caller's attributes function made it): kept as it is when the SDK would
   * copy it unchanged (string, number and boolean values under non-empty
   * keys, at most the count limit), else added one by one as setAttributes
   * does.
   */
  initAttributes(attributes: SpanAttributes): void {
    let count = 0;
    for (const key in attributes) {
      const type = typeof attributes[key];
      if (
        !Object.hasOwn(attributes, key) ||
        key.length === 0 ||
        (type !== 'string' && type !== 'number' && type !== 'boolean') ||
        ++count > ATTRIBUTE_COUNT_LIMIT
      ) {
        this.setAttributes(attributes);
        return;
      }
    }
    this.attributes = attributes;
    this.#attributeCount = count;
  }

  setAttributes(attributes: SpanAttributes | ReadableSpan['attributes']): void {
    if (this.#ended()) return;
    for (const key in attributes) {
      if (!Object.hasOwn(attributes, key)) continue;
      const decision = maybeAddAttribute({
        key,
        value: attributes[key],
        attributes: this.attributes,
        limits: LIMITS,
        currentAttributesCount: this.#attributeCount,
      });
      if (decision === AddAttributeDecision.DROP_LIMIT_REACHED) {
        this.droppedAttributesCount++;
        if (this.droppedAttributesCount === 1) diag.warn('Dropping extra attributes.');
      } else if (decision === AddAttributeDecision.ADD_NEW) this.#attributeCount++;
    }
  }

  addLinks(links: readonly Link[]): void {
    for (const link of links) {
      if (this.#ended()) return;
      if ((this.links as unknown[]) === NONE) this.links = [];
      if (this.links.length >= LINK_COUNT_LIMIT) {
        this.links.shift();
        this.droppedLinksCount++;
      }
      this.links.push({ context: link.context, ...cleanAttributes(link.attributes, LIMITS) });
    }
  }

  /** An `exception` event and status ERROR with the error's message, as the SDK span's recordException and setStatus make them. */
  recordError(error: Error): void {
    if (this.#ended()) return;
    const attributes: Record<string, string> = {};
    const code = (error as { code?: unknown }).code;
    if (code) attributes['exception.type'] = String(code);
    else if (error.name) attributes['exception.type'] = error.name;
    if (error.message) attributes['exception.message'] = error.message;
    if (error.stack) attributes['exception.stacktrace'] = error.stack;
    if (attributes['exception.type'] || attributes['exception.message']) {
      if ((this.events as unknown[]) === NONE) this.events = [];
      if (this.events.length >= EVENT_COUNT_LIMIT) {
        this.events.shift();
        this.droppedEventsCount++;
      }
      this.events.push({
        name: 'exception',
        time: this.#now(),
        ...cleanSimpleAttributes(attributes, {
          attributeCountLimit: ATTRIBUTE_COUNT_LIMIT,
          attributeValueLengthLimit: Number.POSITIVE_INFINITY,
        }),
      });
    } else diag.warn(`Failed to record an exception ${error}`);
    if (this.status.code !== SpanStatusCode.OK) this.status = { code: SpanStatusCode.ERROR, message: error.message };
  }

  /** Ends the span now; with `error`, records it first (exception event, status ERROR). */
  end(error?: unknown): void {
    if (error !== undefined) this.recordError(error instanceof Error ? error : new Error(String(error)));
    if (this.ended) {
      diag.error(
        `${this.name} ${this.#context.traceId}-${this.#context.spanId} - You can only call end() on a span once.`,
      );
      return;
    }
    this.endTime = this.#now();
    this.duration = hrTimeDuration(this.startTime, this.endTime);
    if (this.duration[0] < 0) {
      diag.warn('Inconsistent start and end time, startTime > endTime. Setting span duration to 0ms.');
      this.endTime = [this.startTime[0], this.startTime[1]];
      this.duration = [0, 0];
    }
    if (this.droppedEventsCount > 0)
      diag.warn(`Dropped ${this.droppedEventsCount} events because eventCountLimit reached`);
    if (this.droppedLinksCount > 0) diag.warn(`Dropped ${this.droppedLinksCount} links because linkCountLimit reached`);
    this.ended = true;
    this.#processor?.onEnd(this);
  }

  /** Now, as the SDK span tells it: its start plus the monotonic time since. */
  #now(): HrTime {
    return addHrTimes(this.startTime, millisToHrTime(performance.now() - this.#performanceStart));
  }

  #ended(): boolean {
    if (this.ended) {
      diag.warn(
        `Cannot execute the operation on ended Span {traceId: ${this.#context.traceId}, spanId: ${this.#context.spanId}}`,
      );
    }
    return this.ended;
  }
}
