import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createFeedTelemetry } from '@ctxflow/feeds';
import { createContextTelemetry } from '@ctxflow/session-runner';
import { createConsumerTelemetry } from '@ctxflow/step-context';
import {
  SPAN_BATCH,
  SPAN_CONTEXT_PASS,
  SPAN_STEP_CONTEXT_APPLY,
  SPAN_STORE_COMMIT,
  startTelemetry,
  TRACEPARENT_HEADER,
} from '@ctxflow/telemetry';
import { metrics, trace } from '@opentelemetry/api';
import { afterEach, describe, expect, it, vi } from 'vitest';

/** One OTLP request as the collector stand-in received it. */
interface Received {
  path: string;
  contentType: string | undefined;
  body: Buffer;
}

let server: Server | undefined;
afterEach(async () => {
  if (server) {
    server.close();
    await once(server, 'close');
    server = undefined;
  }
});

async function collector(): Promise<{ endpoint: string; received: Received[] }> {
  const received: Received[] = [];
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ path: req.url ?? '', contentType: req.headers['content-type'], body: Buffer.concat(chunks) });
      res.writeHead(200, { 'content-type': req.headers['content-type'] ?? 'application/json' });
      res.end(req.headers['content-type'] === 'application/json' ? '{}' : '');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { endpoint: `http://127.0.0.1:${port}`, received };
}

function bodyOf(received: Received[], path: string): string {
  return received
    .filter((r) => r.path === path)
    .map((r) => r.body.toString('utf8'))
    .join('\n');
}

/** The standard variables a test sets; every other OTEL_* variable is unset while it runs. */
function useEnv(vars: Record<string, string>): void {
  for (const name of Object.keys(process.env)) if (name.startsWith('OTEL_')) vi.stubEnv(name, undefined);
  for (const [name, value] of Object.entries(vars)) vi.stubEnv(name, value);
}
afterEach(() => {
  vi.unstubAllEnvs();
});

describe('startTelemetry configured by the SDK from OTEL_*', () => {
  it('appends the signal path to the shared endpoint, takes signal endpoints as given, reads protocols, exporters, the service name and resource attributes', async () => {
    const { endpoint, received } = await collector();
    useEnv({
      OTEL_SERVICE_NAME: 'ctxflow-runner',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=prod,team=ops%2Cplatform',
      OTEL_EXPORTER_OTLP_ENDPOINT: `${endpoint}/`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: `${endpoint}/ingest`,
      OTEL_EXPORTER_OTLP_LOGS_PROTOCOL: 'http/protobuf',
      OTEL_METRICS_EXPORTER: 'none',
    });
    const running = startTelemetry({ serviceName: 'x' });
    const telemetry = createContextTelemetry();
    await telemetry.withSpan(SPAN_CONTEXT_PASS, {}, async () => {
      telemetry.contextSkipped({ sessionId: 'ses-env', stepId: 's1', reason: 'hook_error', message: 'x' });
    });
    await running.shutdown();

    expect(received.map((r) => `${r.path} ${r.contentType}`).sort()).toEqual([
      '/ingest application/x-protobuf',
      '/v1/traces application/json',
    ]);
    const resource = JSON.parse(bodyOf(received, '/v1/traces')).resourceSpans[0].resource.attributes as {
      key: string;
      value: { stringValue?: string };
    }[];
    const attribute = (key: string) => resource.find((a) => a.key === key)?.value.stringValue;
    expect(attribute('service.name')).toBe('ctxflow-runner');
    expect(attribute('deployment.environment')).toBe('prod');
    expect(attribute('team')).toBe('ops,platform');
  });

  it('SPAN_BATCH: 5,000 consumer spans ended at once all reach the collector (the SDK default queue of 2,048 drops the rest)', async () => {
    const { endpoint, received } = await collector();
    useEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
    const running = startTelemetry({ serviceName: 'ctxflow-test-batch' });
    const consumer = createConsumerTelemetry();
    const spans = Array.from({ length: 5_000 }, (_, i) =>
      consumer.startSpan(SPAN_STEP_CONTEXT_APPLY, { 'ctxflow.ticket': `T-${i}` }, { kind: 'consumer' }),
    );
    for (const span of spans) span.end();
    await running.shutdown();

    const requests = received.filter((r) => r.path === '/v1/traces');
    const exported = requests.flatMap((r) =>
      JSON.parse(r.body.toString('utf8')).resourceSpans.flatMap((rs: { scopeSpans: { spans: unknown[] }[] }) =>
        rs.scopeSpans.flatMap((ss) => ss.spans),
      ),
    );
    expect(exported).toHaveLength(5_000);
    expect(requests).toHaveLength(Math.ceil(5_000 / SPAN_BATCH.maxExportBatchSize));
  });

  it('refuses grpc, naming every signal at once', () => {
    useEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' });
    expect(() => startTelemetry({ serviceName: 'x' })).toThrow(
      new Error(
        'invalid OpenTelemetry configuration: ' +
          'OTLP protocol "grpc" for traces is not supported (http/protobuf, http/json); ' +
          'OTLP protocol "grpc" for metrics is not supported (http/protobuf, http/json); ' +
          'OTLP protocol "grpc" for logs is not supported (http/protobuf, http/json)',
      ),
    );
  });
});

describe('startTelemetry', () => {
  it('with no OTLP endpoint: collects metrics for GET /metrics, exports nothing, shuts down', async () => {
    useEnv({});
    const running = startTelemetry({ serviceName: 'ctxflow-test-noenv' });
    try {
      const telemetry = createContextTelemetry();
      telemetry.contextSkipped({ sessionId: 'ses-start-1', stepId: 's1', reason: 'hook_error', message: 'boom' });
      telemetry.stepCommitted({
        sessionId: 'ses-start-1',
        stepId: 's1',
        mode: 'first',
        rows: [{ kind: 'instruction', source: 'app' }],
        durationMs: 5,
        requestBytes: 10,
        prefixReusedBytes: 0,
      });
      createFeedTelemetry().ingested({ source: 'zendesk' });

      const text = await running.metricsText();
      expect(text).toContain('target_info{service_name="ctxflow-test-noenv"');
      expect(text).toContain(
        'ctxflow_context_skipped_total{ctxflow_skip_reason="hook_error",otel_scope_name="ctxflow"} 1',
      );
      expect(text).toContain(
        'ctxflow_context_rows_total{ctxflow_row_kind="instruction",ctxflow_row_source="app",otel_scope_name="ctxflow"} 1',
      );
      expect(text).toContain('ctxflow_feed_ingested_total{ctxflow_feed_source="zendesk",otel_scope_name="ctxflow"} 1');
    } finally {
      await running.shutdown();
    }
    // The globals are released: a new start can register again.
    const again = startTelemetry({ serviceName: 'ctxflow-test-noenv-2' });
    expect(await again.metricsText()).toContain('target_info{service_name="ctxflow-test-noenv-2"');
    await again.shutdown();
  });

  it('a second start while one runs does not throw and shares the providers; the last shutdown releases them', async () => {
    useEnv({});
    const first = startTelemetry({ serviceName: 'ctxflow-test-first' });
    const second = startTelemetry({ serviceName: 'ctxflow-test-second' });
    expect(second.serviceName).toBe('ctxflow-test-first');
    createFeedTelemetry().refused({ source: 'generic', reason: 'unauthorized' });
    const line =
      'ctxflow_feed_refused_total{ctxflow_feed_source="generic",ctxflow_feed_reason="unauthorized",otel_scope_name="ctxflow"} 1';
    expect(await second.metricsText()).toContain(line);

    await first.shutdown();
    await first.shutdown();
    expect(await second.metricsText()).toContain(line);
    await second.shutdown();
    // Released: the global meter is a no-op again.
    const probe = metrics.getMeter('probe').createCounter('probe');
    expect(probe.constructor.name).toMatch(/Noop/);
  });

  it('nests spans through the context manager and exports spans, logs and metrics as OTLP http/json', async () => {
    const { endpoint, received } = await collector();
    useEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' });
    const running = startTelemetry({ serviceName: 'ctxflow-test-json' });
    const telemetry = createContextTelemetry();
    let parentTrace = '';
    await telemetry.withSpan(SPAN_CONTEXT_PASS, { 'ctxflow.session_id': 'ses-otlp-json' }, async () => {
      parentTrace = trace.getActiveSpan()?.spanContext().traceId ?? '';
      await telemetry.withSpan(SPAN_STORE_COMMIT, { 'ctxflow.row.count': 1 }, async () => {
        telemetry.contextSkipped({ sessionId: 'ses-otlp-json', stepId: 's1', reason: 'hook_invalid', message: 'bad' });
      });
    });
    await running.shutdown();

    expect(received.every((r) => r.contentType === 'application/json')).toBe(true);
    const spans = JSON.parse(bodyOf(received, '/v1/traces')).resourceSpans[0].scopeSpans[0].spans as {
      name: string;
      traceId: string;
      spanId: string;
      parentSpanId?: string;
    }[];
    const pass = spans.find((s) => s.name === 'ctxflow.context_pass');
    const commit = spans.find((s) => s.name === 'ctxflow.store.commit');
    expect(pass?.traceId).toBe(parentTrace);
    expect(commit?.traceId).toBe(parentTrace);
    expect(commit?.parentSpanId).toBe(pass?.spanId);

    const logsBody = bodyOf(received, '/v1/logs');
    expect(logsBody).toContain('"eventName":"core.context.skipped"');
    expect(logsBody).toContain(`"traceId":"${parentTrace}"`);
    expect(bodyOf(received, '/v1/metrics')).toContain('"name":"ctxflow.context.skipped"');
  });

  it('exports as OTLP http/protobuf', async () => {
    const { endpoint, received } = await collector();
    useEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' });
    const running = startTelemetry({ serviceName: 'ctxflow-test-proto' });
    const telemetry = createContextTelemetry();
    await telemetry.withSpan(SPAN_CONTEXT_PASS, {}, async () => {
      telemetry.contextSkipped({ sessionId: 'ses-otlp-proto', stepId: 's1', reason: 'hook_error', message: 'x' });
    });
    await running.shutdown();

    expect(received.map((r) => r.path).sort()).toEqual(['/v1/logs', '/v1/metrics', '/v1/traces']);
    expect(received.every((r) => r.contentType === 'application/x-protobuf')).toBe(true);
    // Protobuf carries strings as raw UTF-8 bytes.
    expect(bodyOf(received, '/v1/traces')).toContain('ctxflow.context_pass');
    expect(bodyOf(received, '/v1/logs')).toContain('core.context.skipped');
    expect(bodyOf(received, '/v1/metrics')).toContain('ctxflow.context.skipped');
  });

  it('a consumer span of a record whose trace was not sampled: nothing with a parent-based sampler, a span with always_on', async () => {
    const sampledParent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const unsampledParent = '00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-00';
    const applied = (received: Received[]) =>
      JSON.parse(bodyOf(received, '/v1/traces'))
        .resourceSpans.flatMap((r: { scopeSpans: { spans: unknown[] }[] }) => r.scopeSpans.flatMap((s) => s.spans))
        .map((span: { name: string; traceId: string; parentSpanId: string; spanId: string }) => ({
          name: span.name,
          parent: `${span.traceId}-${span.parentSpanId}`,
          spanId: span.spanId,
        }));

    for (const sampler of ['parentbased_traceidratio', 'always_on']) {
      const { endpoint, received } = await collector();
      useEnv({
        OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_TRACES_SAMPLER: sampler,
        OTEL_TRACES_SAMPLER_ARG: '0',
      });
      const running = startTelemetry({ serviceName: 'ctxflow-test-consumer' });
      const consumer = createConsumerTelemetry();
      let attributesBuilt = 0;
      const start = (traceparent: string) =>
        consumer.startSpan(
          SPAN_STEP_CONTEXT_APPLY,
          () => {
            attributesBuilt++;
            return { 'ctxflow.ticket': 'T-1' };
          },
          { kind: 'consumer', parentHeaders: { [TRACEPARENT_HEADER]: traceparent } },
        );
      const sampled = start(sampledParent);
      const unsampled = start(unsampledParent);
      sampled.end();
      unsampled.end();
      await running.shutdown();

      const spans = applied(received);
      expect(sampled.traceparent).toBe(`00-0af7651916cd43dd8448eb211c80319c-${spans[0].spanId}-01`);
      if (sampler === 'always_on') {
        // This sampler ignores the parent's flag: the record's span is recorded and exported.
        expect(spans.map((s: { parent: string }) => s.parent)).toEqual([
          '0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331',
          '1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331',
        ]);
        expect(unsampled.traceparent).toBe(`00-1af7651916cd43dd8448eb211c80319c-${spans[1].spanId}-01`);
        expect(attributesBuilt).toBe(2);
      } else {
        expect(spans).toEqual([
          {
            name: SPAN_STEP_CONTEXT_APPLY,
            parent: '0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331',
            spanId: spans[0].spanId,
          },
        ]);
        expect(unsampled.traceparent).toBeUndefined();
        expect(unsampled.logFields()).toEqual({});
        expect(attributesBuilt).toBe(1);
      }
    }
  });
});
