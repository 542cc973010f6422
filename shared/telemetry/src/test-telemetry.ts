import type { AnyValue, Attributes, Logger, Meter, Tracer } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { InMemoryLogRecordExporter, LoggerProvider, SimpleLogRecordProcessor } from '@opentelemetry/sdk-logs';
import { DataPointType, MeterProvider } from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { INSTRUMENTATION_SCOPE } from './names.ts';
import { PullMetricReader, toPrometheusText } from './pull-metric-reader.ts';

/** A log record as a test sees it. */
export interface TestLogRecord {
  eventName: string | undefined;
  severityNumber: number | undefined;
  severityText: string | undefined;
  body: AnyValue;
  attributes: Attributes;
  /** Trace and span the record was emitted in, when a span was active. */
  traceId: string | undefined;
  spanId: string | undefined;
}

/** A finished span as a test sees it. */
export interface TestSpan {
  name: string;
  attributes: Attributes;
  /** 0 unset, 1 ok, 2 error (SpanStatusCode). */
  statusCode: number;
  statusMessage: string | undefined;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  /** 0 internal, 1 server, 2 client, 3 producer, 4 consumer (SpanKind). */
  kind: number;
  /** The spans this one is linked to. */
  links: { traceId: string; spanId: string }[];
}

/** Count and sum of the values recorded in a histogram. */
export interface HistogramTotals {
  count: number;
  sum: number;
}

export interface TestTelemetry {
  /**
   * Local (never global) API handles, for the telemetry objects of the code
   * under test (each service's `create*Telemetry(handles)` takes them).
   */
  meter: Meter;
  logger: Logger;
  tracer: Tracer;
  /** Every log record emitted so far, in emission order. */
  logRecords(): Promise<TestLogRecord[]>;
  /**
   * Sum, over the data points of metric `name` whose attributes include every
   * entry of `attributes`, of: the value (counters, gauges), or the sum of the
   * recorded values (histograms). 0 when the metric has no such point.
   */
  metric(name: string, attributes?: Attributes): Promise<number>;
  /** Count and sum of the values recorded in histogram `name`, over the points matching `attributes`. */
  histogram(name: string, attributes?: Attributes): Promise<HistogramTotals>;
  /** Prometheus exposition text of every metric so far, as GET /metrics would serve it. */
  metricsText(): Promise<string>;
  /** Every span ended so far, in end order. */
  spans(): Promise<TestSpan[]>;
  shutdown(): Promise<void>;
}

function matches(point: Attributes, wanted: Attributes): boolean {
  return Object.entries(wanted).every(([key, value]) => point[key] === value);
}

/**
 * Telemetry recorded in memory by providers of its own: it never touches the
 * global OpenTelemetry API, so tests running side by side do not see each
 * other's records.
 */
export function createTestTelemetry(): TestTelemetry {
  const resource = resourceFromAttributes({ 'service.name': 'ctxflow-test' });

  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new TracerProvider({
    resource,
    spanProcessors: [new SimpleSpanProcessor({ exporter: spanExporter })],
  });

  // The options-object form `{ exporter }`: in 3.x the processor reads
  // `options.exporter`, so an exporter passed positionally is never called.
  const logExporter = new InMemoryLogRecordExporter();
  const loggerProvider = new LoggerProvider({
    resource,
    processors: [new SimpleLogRecordProcessor({ exporter: logExporter })],
  });

  const reader = new PullMetricReader();
  const meterProvider = new MeterProvider({ resource, readers: [reader] });

  const meter = meterProvider.getMeter(INSTRUMENTATION_SCOPE);
  const logger = loggerProvider.getLogger(INSTRUMENTATION_SCOPE);
  const tracer = tracerProvider.getTracer(INSTRUMENTATION_SCOPE);

  async function points(name: string, attributes: Attributes) {
    const collected = await reader.collectNow();
    const result: { type: DataPointType; value: number; count: number }[] = [];
    for (const scope of collected.scopeMetrics) {
      for (const metric of scope.metrics) {
        if (metric.descriptor.name !== name) continue;
        if (metric.dataPointType === DataPointType.HISTOGRAM) {
          for (const p of metric.dataPoints) {
            if (matches(p.attributes, attributes)) {
              result.push({ type: metric.dataPointType, value: p.value.sum ?? 0, count: p.value.count });
            }
          }
        } else if (metric.dataPointType === DataPointType.SUM || metric.dataPointType === DataPointType.GAUGE) {
          for (const p of metric.dataPoints) {
            if (matches(p.attributes, attributes))
              result.push({ type: metric.dataPointType, value: p.value, count: 1 });
          }
        } else {
          for (const p of metric.dataPoints) {
            if (matches(p.attributes, attributes)) {
              result.push({ type: metric.dataPointType, value: p.value.sum ?? 0, count: p.value.count });
            }
          }
        }
      }
    }
    return result;
  }

  return {
    meter,
    logger,
    tracer,

    async logRecords() {
      // Exports complete asynchronously even with the simple processor.
      await loggerProvider.forceFlush();
      return logExporter.getFinishedLogRecords().map((r) => ({
        eventName: r.eventName,
        severityNumber: r.severityNumber,
        severityText: r.severityText,
        body: r.body,
        attributes: { ...r.attributes },
        traceId: r.spanContext?.traceId,
        spanId: r.spanContext?.spanId,
      }));
    },

    async metric(name, attributes = {}) {
      return (await points(name, attributes)).reduce((sum, p) => sum + p.value, 0);
    },

    async histogram(name, attributes = {}) {
      const found = (await points(name, attributes)).filter((p) => p.type === DataPointType.HISTOGRAM);
      return {
        count: found.reduce((n, p) => n + p.count, 0),
        sum: found.reduce((n, p) => n + p.value, 0),
      };
    },

    async metricsText() {
      return toPrometheusText(await reader.collectNow());
    },

    async spans() {
      await tracerProvider.forceFlush();
      return spanExporter.getFinishedSpans().map((s) => ({
        name: s.name,
        attributes: { ...s.attributes },
        statusCode: s.status.code,
        statusMessage: s.status.message,
        traceId: s.spanContext().traceId,
        spanId: s.spanContext().spanId,
        parentSpanId: s.parentSpanContext?.spanId,
        kind: s.kind,
        links: s.links.map((l) => ({ traceId: l.context.traceId, spanId: l.context.spanId })),
      }));
    },

    async shutdown() {
      await Promise.all([tracerProvider.shutdown(), loggerProvider.shutdown(), meterProvider.shutdown()]);
    },
  };
}
