import { isSpanContextValid, trace } from '@opentelemetry/api';
import pino from 'pino';

/** Paths that must never reach a log line: credentials and webhook bodies. */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers["x-ctxflow-signature"]',
  'req.headers["x-hub-signature"]',
  'req.headers["x-hub-signature-256"]',
  'req.headers["x-zendesk-webhook-signature"]',
  'headers.authorization',
  '*.secret',
  '*.apiKey',
  '*.body',
  // Connection credentials (they are Secret values, which never serialize; these paths are the second guard).
  'password',
  '*.password',
  'sasl',
  '*.sasl',
  'token',
  '*.token',
  'redisUrl',
  '*.redisUrl',
];

export type Logger = pino.Logger;

/**
 * `trace_id` and `span_id` of the span active where a line is logged, so a
 * log line is found from its trace and back; nothing outside a span (or when
 * no OpenTelemetry context manager runs, e.g. in unit tests).
 */
export function traceMixin(): { trace_id?: string; span_id?: string } {
  const spanContext = trace.getActiveSpan()?.spanContext();
  if (!spanContext || !isSpanContextValid(spanContext)) return {};
  return { trace_id: spanContext.traceId, span_id: spanContext.spanId };
}

export function createLogger(options: {
  service: string;
  level?: string;
  destination?: pino.DestinationStream;
}): Logger {
  return pino(
    {
      level: options.level ?? 'info',
      base: { service: options.service },
      mixin: traceMixin,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    },
    options.destination,
  );
}
