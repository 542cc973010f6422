import {
  type Context,
  context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  isSpanContextValid,
  type Link,
  ROOT_CONTEXT,
  type SpanContext,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

/**
 * W3C trace context (`traceparent`, `tracestate`) carried in message headers:
 * Kafka record headers and HTTP headers. One propagator instance, not the
 * global one, so the format on the wire never depends on what registered what.
 *
 * `traceparent` is `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`.
 */
const w3c = new W3CTraceContextPropagator();

/** The header that carries a span's position in its trace. */
export const TRACEPARENT_HEADER = 'traceparent';
/** Vendor-specific trace state, next to `traceparent`. */
export const TRACESTATE_HEADER = 'tracestate';
/**
 * Response header of the step-context service's `POST /step-context`: the
 * traceparents of the ticket updates the answered batch covers, comma
 * separated (at most {@link MAX_TRACE_LINKS}). The runner links its context
 * pass to them. Any hook may send it; it only adds span links.
 */
export const TRACE_LINKS_HEADER = 'ctxflow-trace-links';
/** Most span links one context pass takes from a batch (the earliest entries win). */
export const MAX_TRACE_LINKS = 32;

/** Header values as node's http module and fastify hand them over. */
export type HeaderBag = Readonly<Record<string, string | string[] | undefined>>;

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * Writes the trace context of `ctx` (default: the active context) into
 * `carrier` as `traceparent` and, when set, `tracestate`. Writes nothing when
 * no valid span is active. Returns `carrier`.
 */
export function injectTraceContext(
  carrier: Record<string, string>,
  ctx: Context = context.active(),
): Record<string, string> {
  w3c.inject(ctx, carrier, defaultTextMapSetter);
  return carrier;
}

/** A version-00 traceparent exactly as our services write it (no surrounding blanks, no trace state). */
const PLAIN_TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;
const ZERO_TRACE_ID = '0'.repeat(32);
const ZERO_SPAN_ID = '0'.repeat(16);

/**
 * The context whose remote parent is the `traceparent` in `headers` (ROOT when
 * absent or malformed).
 *
 * A consumer calls this once per record, so the common case, a plain
 * version-00 `traceparent` and no `tracestate`, is read here directly, as the
 * W3C propagator reads it; everything else (blanks around it, other versions,
 * a trace state, an array of values) goes to the propagator.
 */
export function extractTraceContext(headers: HeaderBag): Context {
  const traceparent = headers[TRACEPARENT_HEADER];
  if (
    typeof traceparent !== 'string' ||
    headers[TRACESTATE_HEADER] !== undefined ||
    !PLAIN_TRACEPARENT.test(traceparent)
  ) {
    return w3c.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
  }
  const traceId = traceparent.slice(3, 35);
  const spanId = traceparent.slice(36, 52);
  if (traceId === ZERO_TRACE_ID || spanId === ZERO_SPAN_ID) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId,
    spanId,
    traceFlags: Number.parseInt(traceparent.slice(53), 16),
    isRemote: true,
  });
}

/**
 * Runs `fn` with the remote parent named by `headers` as the active context
 * (spans started inside become its children); with no valid `traceparent`
 * there, `fn` runs in the current context.
 */
export function withRemoteParent<T>(headers: HeaderBag, fn: () => T): T {
  const remote = extractTraceContext(headers);
  return isSpanContextValid(trace.getSpanContext(remote) ?? INVALID) ? context.with(remote, fn) : fn();
}

const INVALID: SpanContext = { traceId: '', spanId: '', traceFlags: 0 };

/** The `traceparent` of the active span, or undefined when none is active and valid. */
export function activeTraceparent(): string | undefined {
  return injectTraceContext({})[TRACEPARENT_HEADER];
}

/** The span context a `traceparent` names, or undefined when it is not a valid version-00 one. */
export function parseTraceparent(traceparent: string): SpanContext | undefined {
  const match = TRACEPARENT.exec(traceparent.trim());
  if (!match) return undefined;
  const spanContext: SpanContext = {
    traceId: match[1]!,
    spanId: match[2]!,
    traceFlags: Number.parseInt(match[3]!, 16),
    isRemote: true,
  };
  return isSpanContextValid(spanContext) ? spanContext : undefined;
}

/** Span links to the valid traceparents among `traceparents` (duplicates once, at most MAX_TRACE_LINKS). */
export function linksTo(traceparents: readonly string[]): Link[] {
  const seen = new Set<string>();
  const links: Link[] = [];
  for (const raw of traceparents) {
    const spanContext = parseTraceparent(raw);
    if (!spanContext) continue;
    const key = `${spanContext.traceId}-${spanContext.spanId}`;
    if (seen.has(key)) continue;
    seen.add(key);
    links.push({ context: spanContext });
    if (links.length >= MAX_TRACE_LINKS) break;
  }
  return links;
}

/** The `ctxflow-trace-links` header value for `traceparents` (valid ones only, at most MAX_TRACE_LINKS). */
export function formatTraceLinks(traceparents: readonly string[]): string {
  return linksTo(traceparents)
    .map((l) => `00-${l.context.traceId}-${l.context.spanId}-${l.context.traceFlags.toString(16).padStart(2, '0')}`)
    .join(',');
}

/** The traceparents of a `ctxflow-trace-links` header value (invalid parts dropped). */
export function parseTraceLinks(value: string | null | undefined): string[] {
  if (!value) return [];
  return value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => parseTraceparent(s) !== undefined)
    .slice(0, MAX_TRACE_LINKS);
}

/**
 * `trace_id` and `span_id` of a traceparent, for a log line written outside
 * the span's own context (pino's mixin adds them only for the active span);
 * an empty object when `traceparent` is absent or invalid.
 */
export function traceLogFields(traceparent: string | undefined): { trace_id?: string; span_id?: string } {
  const spanContext = traceparent === undefined ? undefined : parseTraceparent(traceparent);
  return spanContext ? { trace_id: spanContext.traceId, span_id: spanContext.spanId } : {};
}
