import { context, diag, logs, metrics, propagation, trace } from '@opentelemetry/api';
import { getNumberFromEnv, getStringFromEnv, getStringListFromEnv } from '@opentelemetry/core';
import { OTLPMetricExporter as JsonMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPMetricExporter as ProtoMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { type IMetricReader, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { BatchSpanProcessor, type SpanProcessor } from '@opentelemetry/sdk-trace';
import { PullMetricReader, toPrometheusText } from './pull-metric-reader.ts';

/**
 * The BatchSpanProcessor's settings, each overridable by its standard
 * variable (OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
 * OTEL_BSP_SCHEDULE_DELAY). A consumer makes one span per sampled record: at
 * 100% sampling and ~15k records/s, the SDK's defaults (2,048 queued, 512 per
 * export, 5 s) drop spans while one export is in flight. 16,384 queued spans
 * hold about a second of that; exports of 2,048 spans make 8x fewer requests
 * than 512 (each request's fixed cost: headers, a socket write, a response).
 */
export const SPAN_BATCH = Object.freeze({
  maxQueueSize: 16_384,
  maxExportBatchSize: 2_048,
  scheduledDelayMillis: 1_000,
});

/** The OTLP protocols ctxflow exports with (`grpc` is refused: its exporters are not installed). */
const PROTOCOLS = ['http/protobuf', 'http/json'] as const;
type Protocol = (typeof PROTOCOLS)[number];
type Signal = 'TRACES' | 'METRICS' | 'LOGS';

/**
 * The protocol `signal` is exported with, or undefined when it is not
 * exported: no OTLP endpoint at all (OTEL_EXPORTER_OTLP_ENDPOINT and the
 * signal's own one unset: nothing leaves the process, metrics still collect
 * for GET /metrics), or `none` in OTEL_{signal}_EXPORTER. Endpoints, headers,
 * timeouts and compression are read by the OTLP exporters themselves.
 */
function exportProtocol(signal: Signal, problems: string[]): Protocol | undefined {
  const endpoint =
    getStringFromEnv(`OTEL_EXPORTER_OTLP_${signal}_ENDPOINT`) ?? getStringFromEnv('OTEL_EXPORTER_OTLP_ENDPOINT');
  if (!endpoint || (getStringListFromEnv(`OTEL_${signal}_EXPORTER`) ?? []).includes('none')) return undefined;
  const protocol =
    getStringFromEnv(`OTEL_EXPORTER_OTLP_${signal}_PROTOCOL`) ??
    getStringFromEnv('OTEL_EXPORTER_OTLP_PROTOCOL') ??
    'http/protobuf';
  const known = PROTOCOLS.find((p) => p === protocol);
  if (!known) {
    problems.push(`OTLP protocol "${protocol}" for ${signal.toLowerCase()} is not supported (${PROTOCOLS.join(', ')})`);
  }
  return known;
}

function spanProcessor(protocol: Protocol): SpanProcessor {
  return new BatchSpanProcessor({
    exporter: protocol === 'http/json' ? new JsonTraceExporter() : new ProtoTraceExporter(),
    maxQueueSize: getNumberFromEnv('OTEL_BSP_MAX_QUEUE_SIZE') ?? SPAN_BATCH.maxQueueSize,
    maxExportBatchSize: getNumberFromEnv('OTEL_BSP_MAX_EXPORT_BATCH_SIZE') ?? SPAN_BATCH.maxExportBatchSize,
    scheduledDelayMillis: getNumberFromEnv('OTEL_BSP_SCHEDULE_DELAY') ?? SPAN_BATCH.scheduledDelayMillis,
  });
}

function metricReader(protocol: Protocol): IMetricReader {
  const exportIntervalMillis = getNumberFromEnv('OTEL_METRIC_EXPORT_INTERVAL') ?? 60_000;
  return new PeriodicExportingMetricReader({
    exporter: protocol === 'http/json' ? new JsonMetricExporter() : new ProtoMetricExporter(),
    exportIntervalMillis,
    exportTimeoutMillis: getNumberFromEnv('OTEL_METRIC_EXPORT_TIMEOUT') ?? Math.min(30_000, exportIntervalMillis),
  });
}

export interface StartTelemetryOptions {
  /** service.name unless OTEL_SERVICE_NAME (or `service.name` in OTEL_RESOURCE_ATTRIBUTES) is set. */
  serviceName: string;
  /** Collect metrics for `metricsText()` (GET /metrics). Default true. */
  prometheus?: boolean;
}

export interface RunningTelemetry {
  /** The service name given to the first start (the resource's, unless the environment names another). */
  readonly serviceName: string;
  /**
   * Prometheus text exposition (content type `text/plain; version=0.0.4`) of
   * every metric recorded through the global meter provider, for GET /metrics.
   * Empty when started with `prometheus: false` or with OTEL_SDK_DISABLED.
   */
  metricsText(): Promise<string>;
  /**
   * Flushes and stops exporting. Idempotent per handle. Providers shut down and
   * the globals are released when the last running handle shuts down.
   */
  shutdown(): Promise<void>;
}

interface Shared {
  serviceName: string;
  metricsText(): Promise<string>;
  close(): Promise<void>;
  handles: number;
}

let shared: Shared | undefined;

function start(options: StartTelemetryOptions): Shared {
  const problems: string[] = [];
  const traces = exportProtocol('TRACES', problems);
  const metricsProtocol = exportProtocol('METRICS', problems);
  const logsProtocol = exportProtocol('LOGS', problems);
  if (problems.length > 0) throw new Error(`invalid OpenTelemetry configuration: ${problems.join('; ')}`);

  const pull = options.prometheus === false ? undefined : new PullMetricReader();
  const metricReaders: IMetricReader[] = pull ? [pull] : [];
  if (metricsProtocol) metricReaders.push(metricReader(metricsProtocol));

  // The SDK reads the rest of OTEL_*: sampler (OTEL_TRACES_SAMPLER, _ARG; default parent-based always-on),
  // resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_NODE_RESOURCE_DETECTORS), propagators,
  // span limits, the log exporter and its batch processor, OTEL_SDK_DISABLED, OTEL_LOG_LEVEL.
  const sdk = new NodeSDK({
    resource: defaultResource().merge(resourceFromAttributes({ 'service.name': options.serviceName })),
    // Unless OTEL_NODE_RESOURCE_DETECTORS names detectors, only the environment's attributes join the
    // resource: the SDK's default host and process detectors would put the command line on every span batch
    // and in every scrape's target_info.
    ...(getStringFromEnv('OTEL_NODE_RESOURCE_DETECTORS') ? {} : { resourceDetectors: [envDetector] }),
    // No trace exporter: no tracer provider (the API's no-op tracer), so spans cost nothing; an incoming
    // traceparent still travels on unchanged, as the no-op tracer's span carries its parent's context.
    spanProcessors: traces ? [spanProcessor(traces)] : [],
    metricReaders,
    // Undefined: the SDK picks the log exporter from OTEL_LOGS_EXPORTER and the protocol.
    ...(logsProtocol ? {} : { logRecordProcessors: [] }),
  });
  sdk.start();

  return {
    serviceName: options.serviceName,
    handles: 0,
    async metricsText() {
      if (!pull) return '';
      try {
        return toPrometheusText(await pull.collectNow());
      } catch (err) {
        // OTEL_SDK_DISABLED: the reader was never bound to a meter provider.
        diag.debug('ctxflow telemetry: no metrics to collect', err);
        return '';
      }
    },
    async close() {
      try {
        await sdk.shutdown();
      } catch (err) {
        diag.error('ctxflow telemetry: shutdown failed', err);
      }
      trace.disable();
      metrics.disable();
      logs.disable();
      propagation.disable();
      context.disable();
    },
  };
}

/**
 * Starts the OpenTelemetry SDK (NodeSDK) for this process, configured from
 * the standard OTEL_* variables: it registers the global tracer, meter and
 * logger providers, the AsyncLocalStorage context manager and the W3C
 * trace-context and baggage propagators. Spans go through a BatchSpanProcessor
 * (SPAN_BATCH) to the OTLP exporter of OTEL_EXPORTER_OTLP_PROTOCOL. A signal
 * with no OTLP endpoint is not exported, yet metrics still collect for
 * `metricsText()`. Call before building telemetry objects that should default
 * to the globals (or build them lazily: they are).
 *
 * The globals exist once per process: a second call while a handle is still
 * running returns another handle on the same providers (the first call's
 * options win) and never throws. Throws an Error naming every unsupported
 * OTLP protocol.
 */
export function startTelemetry(options: StartTelemetryOptions): RunningTelemetry {
  shared ??= start(options);
  const current = shared;
  current.handles += 1;
  let closed = false;
  return {
    serviceName: current.serviceName,
    metricsText: () => current.metricsText(),
    async shutdown() {
      if (closed) return;
      closed = true;
      current.handles -= 1;
      if (current.handles > 0) return;
      if (shared === current) shared = undefined;
      await current.close();
    },
  };
}
