import { context, diag, logs, metrics, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  CompositePropagator,
  type InstrumentationScope,
  W3CBaggagePropagator,
  W3CTraceContextPropagator,
} from '@opentelemetry/core';
import { OTLPLogExporter as JsonLogExporter } from '@opentelemetry/exporter-logs-otlp-http';
import { OTLPLogExporter as ProtoLogExporter } from '@opentelemetry/exporter-logs-otlp-proto';
import { OTLPMetricExporter as JsonMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPMetricExporter as ProtoMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchLogRecordProcessor, LoggerProvider, type LogRecordExporter } from '@opentelemetry/sdk-logs';
import {
  type IMetricReader,
  MeterProvider,
  PeriodicExportingMetricReader,
  type PushMetricExporter,
} from '@opentelemetry/sdk-metrics';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import type { DirectSpanTarget } from './direct-span.ts';
import { INSTRUMENTATION_SCOPE } from './names.ts';
import { PullMetricReader, toPrometheusText } from './pull-metric-reader.ts';
import { WorkerBatchSpanProcessor } from './worker-span-processor.ts';

export type OtlpProtocol = 'http/protobuf' | 'http/json';

/** Where one signal goes. */
export interface OtlpTarget {
  url: string;
  protocol: OtlpProtocol;
}

export type SamplerName =
  | 'always_on'
  | 'always_off'
  | 'traceidratio'
  | 'parentbased_always_on'
  | 'parentbased_always_off'
  | 'parentbased_traceidratio';

/** The standard OpenTelemetry environment, parsed. */
export interface TelemetryConfig {
  serviceName: string;
  resourceAttributes: Record<string, string>;
  /** undefined: the signal is not exported (no endpoint, or `OTEL_*_EXPORTER=none`). */
  traces: OtlpTarget | undefined;
  metrics: OtlpTarget | undefined;
  logs: OtlpTarget | undefined;
  sampler: SamplerName;
  /** Sampling ratio in [0, 1] for the *traceidratio samplers. */
  samplerRatio: number;
  /** Interval between two OTLP metric exports (ms). */
  metricExportIntervalMs: number;
}

export type TelemetryEnv = Readonly<Record<string, string | undefined>>;

const SAMPLERS: readonly SamplerName[] = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
];

const SIGNAL_PATHS = { TRACES: 'v1/traces', METRICS: 'v1/metrics', LOGS: 'v1/logs' } as const;

function nonEmpty(value: string | undefined): string | undefined {
  const trimmed = value?.trim();
  return trimmed ? trimmed : undefined;
}

/** `OTEL_RESOURCE_ATTRIBUTES`: `key=value,key=value`, keys and values percent-encoded. */
function parseResourceAttributes(raw: string | undefined, problems: string[]): Record<string, string> {
  const attributes: Record<string, string> = {};
  for (const pair of (raw ?? '').split(',')) {
    if (!pair.trim()) continue;
    const eq = pair.indexOf('=');
    if (eq <= 0) {
      problems.push(`OTEL_RESOURCE_ATTRIBUTES: "${pair}" is not key=value`);
      continue;
    }
    try {
      attributes[decodeURIComponent(pair.slice(0, eq).trim())] = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      problems.push(`OTEL_RESOURCE_ATTRIBUTES: "${pair}" is not valid percent-encoding`);
    }
  }
  return attributes;
}

function otlpTarget(env: TelemetryEnv, signal: keyof typeof SIGNAL_PATHS, problems: string[]): OtlpTarget | undefined {
  const exporters = (nonEmpty(env[`OTEL_${signal}_EXPORTER`]) ?? 'otlp').split(',').map((s) => s.trim());
  if (exporters.includes('none')) return undefined;

  // A signal-specific endpoint is used as given; the shared one gets the signal's path appended.
  const specific = nonEmpty(env[`OTEL_EXPORTER_OTLP_${signal}_ENDPOINT`]);
  const base = nonEmpty(env.OTEL_EXPORTER_OTLP_ENDPOINT);
  const url = specific ?? (base ? `${base.replace(/\/+$/, '')}/${SIGNAL_PATHS[signal]}` : undefined);
  if (!url) return undefined;
  try {
    new URL(url);
  } catch {
    problems.push(`OTLP ${signal.toLowerCase()} endpoint "${url}" is not a URL`);
    return undefined;
  }

  const protocol =
    nonEmpty(env[`OTEL_EXPORTER_OTLP_${signal}_PROTOCOL`]) ??
    nonEmpty(env.OTEL_EXPORTER_OTLP_PROTOCOL) ??
    'http/protobuf';
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') {
    problems.push(
      `OTLP protocol "${protocol}" for ${signal.toLowerCase()} is not supported (http/protobuf, http/json)`,
    );
    return undefined;
  }
  return { url, protocol };
}

/**
 * Reads the standard OpenTelemetry variables: OTEL_SERVICE_NAME,
 * OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_ENDPOINT,
 * OTEL_EXPORTER_OTLP_{TRACES,METRICS,LOGS}_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL
 * (and per signal), OTEL_{TRACES,METRICS,LOGS}_EXPORTER (`none` turns a signal
 * off), OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG, OTEL_METRIC_EXPORT_INTERVAL.
 * Throws one Error naming every problem found.
 */
export function readTelemetryConfig(serviceName: string, env: TelemetryEnv): TelemetryConfig {
  const problems: string[] = [];
  const resourceAttributes = parseResourceAttributes(env.OTEL_RESOURCE_ATTRIBUTES, problems);

  const samplerRaw = nonEmpty(env.OTEL_TRACES_SAMPLER) ?? 'parentbased_always_on';
  const sampler = SAMPLERS.find((s) => s === samplerRaw);
  if (!sampler) problems.push(`OTEL_TRACES_SAMPLER "${samplerRaw}" is not one of ${SAMPLERS.join(', ')}`);

  let samplerRatio = 1;
  const ratioRaw = nonEmpty(env.OTEL_TRACES_SAMPLER_ARG);
  if (ratioRaw !== undefined && sampler?.endsWith('traceidratio')) {
    samplerRatio = Number(ratioRaw);
    if (!Number.isFinite(samplerRatio) || samplerRatio < 0 || samplerRatio > 1) {
      problems.push(`OTEL_TRACES_SAMPLER_ARG "${ratioRaw}" is not a ratio in [0, 1]`);
    }
  }

  let metricExportIntervalMs = 60_000;
  const intervalRaw = nonEmpty(env.OTEL_METRIC_EXPORT_INTERVAL);
  if (intervalRaw !== undefined) {
    metricExportIntervalMs = Number(intervalRaw);
    if (!Number.isInteger(metricExportIntervalMs) || metricExportIntervalMs <= 0) {
      problems.push(`OTEL_METRIC_EXPORT_INTERVAL "${intervalRaw}" is not a positive integer (ms)`);
    }
  }

  const config = {
    serviceName: nonEmpty(env.OTEL_SERVICE_NAME) ?? serviceName,
    resourceAttributes,
    traces: otlpTarget(env, 'TRACES', problems),
    metrics: otlpTarget(env, 'METRICS', problems),
    logs: otlpTarget(env, 'LOGS', problems),
    sampler: sampler ?? 'parentbased_always_on',
    samplerRatio,
    metricExportIntervalMs,
  };
  if (problems.length > 0) throw new Error(`invalid OpenTelemetry configuration: ${problems.join('; ')}`);
  return Object.freeze(config);
}

function makeSampler(name: SamplerName, ratio: number): Sampler {
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
  }
}

function logExporter(target: OtlpTarget): LogRecordExporter {
  return target.protocol === 'http/json'
    ? new JsonLogExporter({ url: target.url })
    : new ProtoLogExporter({ url: target.url });
}

function metricExporter(target: OtlpTarget): PushMetricExporter {
  return target.protocol === 'http/json'
    ? new JsonMetricExporter({ url: target.url })
    : new ProtoMetricExporter({ url: target.url });
}

export interface StartTelemetryOptions {
  /** service.name unless OTEL_SERVICE_NAME is set. */
  serviceName: string;
  /** Collect metrics for `metricsText()` (GET /metrics). Default true. */
  prometheus?: boolean;
  /** The environment to read; default `process.env`. */
  env?: TelemetryEnv;
}

export interface RunningTelemetry {
  /** The configuration in force (from the first start; see startTelemetry). */
  readonly config: TelemetryConfig;
  /**
   * Prometheus text exposition (content type `text/plain; version=0.0.4`) of
   * every metric recorded through the global meter provider, for GET /metrics.
   * Empty when started with `prometheus: false`.
   */
  metricsText(): Promise<string>;
  /**
   * Flushes and stops exporting. Idempotent per handle. Providers shut down and
   * the globals are released when the last running handle shuts down.
   */
  shutdown(): Promise<void>;
}

interface Shared {
  config: TelemetryConfig;
  metricsText(): Promise<string>;
  close(): Promise<void>;
  handles: number;
}

let shared: Shared | undefined;

/** See globalDirectSpans. */
let directSpans: DirectSpanTarget | undefined;

/**
 * Set while the global tracer provider is the one startTelemetry registered
 * with a parent-based sampler (`parentbased_*`, the default). That sampler
 * decides a span whose parent is remote by the parent's sampled flag alone:
 * never recorded when it is off, recorded and sampled when it is on. So a
 * caller may skip the first (the SDK would return a non-recording span) and
 * make the second as a DirectSpan, which the provider's processor exports as
 * it exports the SDK's spans.
 */
export function globalDirectSpans(): DirectSpanTarget | undefined {
  return directSpans;
}

function start(options: StartTelemetryOptions): Shared {
  const config = readTelemetryConfig(options.serviceName, options.env ?? process.env);
  const resource = defaultResource().merge(
    resourceFromAttributes({ ...config.resourceAttributes, 'service.name': config.serviceName }),
  );

  // The SDK's BatchSpanProcessor and OTLP exporter, run in a worker thread: a consumer making one span
  // per record would otherwise spend most of its telemetry time encoding them on its own thread.
  const spanProcessor = config.traces ? new WorkerBatchSpanProcessor(config.traces) : undefined;
  const tracerProvider = new TracerProvider({
    resource,
    sampler: makeSampler(config.sampler, config.samplerRatio),
    spanProcessors: spanProcessor ? [spanProcessor] : [],
  });

  const pull = options.prometheus === false ? undefined : new PullMetricReader();
  const readers: IMetricReader[] = pull ? [pull] : [];
  if (config.metrics) {
    readers.push(
      new PeriodicExportingMetricReader({
        exporter: metricExporter(config.metrics),
        exportIntervalMillis: config.metricExportIntervalMs,
        exportTimeoutMillis: Math.min(30_000, config.metricExportIntervalMs),
      }),
    );
  }
  const meterProvider = new MeterProvider({ resource, readers });

  const loggerProvider = new LoggerProvider({
    resource,
    processors: config.logs ? [new BatchLogRecordProcessor({ exporter: logExporter(config.logs) })] : [],
  });

  // Registration is refused (false, never a throw) when another component
  // already set a global; only what was registered here is released later.
  const contextManager = new AsyncLocalStorageContextManager().enable();
  const registered = {
    context: context.setGlobalContextManager(contextManager),
    propagation: propagation.setGlobalPropagator(
      new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
    ),
    trace: trace.setGlobalTracerProvider(tracerProvider),
    metrics: metrics.setGlobalMeterProvider(meterProvider),
    logs: logs.setGlobalLoggerProvider(loggerProvider),
  };
  for (const [api, ok] of Object.entries(registered)) {
    if (!ok) diag.warn(`ctxflow telemetry: a global ${api} provider was already registered; keeping it`);
  }
  if (!registered.context) contextManager.disable();
  if (registered.trace && config.sampler.startsWith('parentbased_')) {
    // The scope object of the SDK's `ctxflow` tracer, so its spans and direct ones are exported as one scope.
    const tracer = tracerProvider.getTracer(INSTRUMENTATION_SCOPE) as { instrumentationScope?: InstrumentationScope };
    directSpans = {
      resource,
      scope: tracer.instrumentationScope ?? { name: INSTRUMENTATION_SCOPE },
      processor: spanProcessor,
    };
  }

  return {
    config,
    handles: 0,
    async metricsText() {
      return pull ? toPrometheusText(await pull.collectNow()) : '';
    },
    async close() {
      const results = await Promise.allSettled([
        tracerProvider.shutdown(),
        meterProvider.shutdown(),
        loggerProvider.shutdown(),
      ]);
      if (registered.trace) {
        directSpans = undefined;
        trace.disable();
      }
      if (registered.metrics) metrics.disable();
      if (registered.logs) logs.disable();
      if (registered.propagation) propagation.disable();
      if (registered.context) context.disable();
      for (const r of results) if (r.status === 'rejected') diag.error('ctxflow telemetry: shutdown failed', r.reason);
    },
  };
}

/**
 * Configures the global tracer, meter and logger providers from the standard
 * OpenTelemetry environment (see readTelemetryConfig) and registers the
 * AsyncLocalStorage context manager and the W3C trace-context and baggage
 * propagators. A signal with no OTLP endpoint is not exported, yet metrics
 * still collect for `metricsText()`. Call before building telemetry objects
 * that should default to the globals (or build them lazily: they are).
 *
 * The globals exist once per process: a second call while a handle is still
 * running returns another handle on the same providers (the first call's
 * options win) and never throws. Throws an Error naming every invalid
 * variable.
 */
export function startTelemetry(options: StartTelemetryOptions): RunningTelemetry {
  shared ??= start(options);
  const current = shared;
  current.handles += 1;
  let closed = false;
  return {
    config: current.config,
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
