/**
 * ConsumerTelemetry.startSpan on startTelemetry's global tracer with its
 * parent-based sampler makes a record's span without the SDK tracer
 * (DirectSpan). What reaches the collector must be what the SDK tracer's span
 * sends for the same calls: every field but the span id and the timestamps.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createConsumerTelemetry,
  type SpanAttributes,
  type StartedSpan,
  startTelemetry,
  TRACEPARENT_HEADER,
} from '@ctxflow/telemetry';
import { trace } from '@opentelemetry/api';
import { afterEach, describe, expect, it } from 'vitest';

let server: Server | undefined;
afterEach(async () => {
  server?.close();
  if (server) await once(server, 'close');
  server = undefined;
});

async function collector(): Promise<{ endpoint: string; bodies: string[] }> {
  const bodies: string[] = [];
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/traces') bodies.push(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies };
}

interface OtlpSpan {
  spanId: string;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: { key: string; value: { stringValue?: string } }[];
  events: { timeUnixNano: string }[];
}

const PARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03';
const LINKED = '00-11111111111111111111111111111111-2222222222222222-01';

describe('DirectSpan', () => {
  it('exports what the SDK span exports for the same calls, in the same scope, ids and times aside', async () => {
    const { endpoint, bodies } = await collector();
    const running = startTelemetry({
      serviceName: 'ctxflow-test-direct',
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
    });
    const direct = createConsumerTelemetry();
    // An explicit tracer takes the SDK's path, on the same global provider.
    const sdk = createConsumerTelemetry({ tracer: trace.getTracer('ctxflow') });
    const failure = Object.assign(new Error('redis went away'), { code: 'ECONNRESET' });
    const cases: [string, (span: StartedSpan) => void][] = [
      ['plain', (span) => span.end()],
      ['odd-attributes', (span) => span.end()],
      ['failed', (span) => span.end(failure)],
      ['failed-with-a-string', (span) => span.end('not an error')],
      [
        'changed',
        (span) => {
          span.setAttributes({ 'ctxflow.later': 3.5, 'ctxflow.flag': false, 'ctxflow.case': 'changed' });
          span.link([LINKED, 'not-a-traceparent']);
          span.end();
          span.end();
          span.setAttributes({ 'ctxflow.after-end': 1 });
        },
      ],
    ];
    const handles: Record<string, StartedSpan> = {};
    for (const [name, finish] of cases) {
      for (const [path, telemetry] of [
        ['direct', direct],
        ['sdk', sdk],
      ] as const) {
        const span = telemetry.startSpan(
          'ctxflow.step_context.apply',
          () =>
            ({
              'ctxflow.case': name,
              'ctxflow.path': path,
              'messaging.destination.partition.id': 2,
              // Through the SDK's validation: an empty key and an undefined value dropped, an object kept as a map.
              ...(name === 'odd-attributes'
                ? { '': 'x', 'ctxflow.none': undefined as never, 'ctxflow.object': {} as never }
                : {}),
            }) as unknown as SpanAttributes,
          { kind: 'consumer', parentHeaders: { [TRACEPARENT_HEADER]: PARENT } },
        );
        handles[`${name}/${path}`] = span;
        finish(span);
      }
    }
    expect(handles['plain/direct']!.constructor.name).toBe('DirectSpan');
    expect(handles['plain/sdk']!.constructor.name).not.toBe('DirectSpan');
    await running.shutdown();

    const requests = bodies.map((b) => JSON.parse(b));
    const resourceSpans = requests.flatMap((r) => r.resourceSpans);
    expect(resourceSpans).toHaveLength(1);
    expect(resourceSpans[0].scopeSpans).toHaveLength(1);
    expect(resourceSpans[0].scopeSpans[0].scope).toEqual({ name: 'ctxflow' });
    const spans = resourceSpans[0].scopeSpans[0].spans as OtlpSpan[];
    expect(spans).toHaveLength(2 * cases.length);
    const attribute = (span: OtlpSpan, key: string) => span.attributes.find((a) => a.key === key)?.value.stringValue;
    /**
     * A span without what differs by nature: its id, its times, the path
     * attribute, and the frames of the stack trace of an Error made for a
     * thrown string (made in each path's own function).
     */
    const comparable = (span: OtlpSpan) => ({
      ...span,
      spanId: undefined,
      startTimeUnixNano: undefined,
      endTimeUnixNano: undefined,
      attributes: span.attributes.filter((a) => a.key !== 'ctxflow.path'),
      events: span.events.map((e) => ({
        ...e,
        timeUnixNano: undefined,
        attributes: (e as unknown as { attributes: { key: string; value: { stringValue?: string } }[] }).attributes.map(
          (a) =>
            a.key === 'exception.stacktrace' && a.value.stringValue?.startsWith('Error: not an error\n')
              ? { key: a.key, value: { stringValue: 'Error: not an error' } }
              : a,
        ),
      })),
    });
    for (const [name] of cases) {
      const of = (path: string) =>
        spans.find((s) => attribute(s, 'ctxflow.case') === name && attribute(s, 'ctxflow.path') === path)!;
      const [d, s] = [of('direct'), of('sdk')];
      expect(comparable(d)).toEqual(comparable(s));
      expect(handles[`${name}/direct`]!.traceparent).toBe(`00-0af7651916cd43dd8448eb211c80319c-${d.spanId}-01`);
      expect(handles[`${name}/direct`]!.logFields()).toEqual({
        trace_id: '0af7651916cd43dd8448eb211c80319c',
        span_id: d.spanId,
      });
      expect(BigInt(d.endTimeUnixNano) >= BigInt(d.startTimeUnixNano)).toBe(true);
    }
    // What the comparison covered: an exception event with the error's code as its type, a status, a link.
    const failed = of(spans, 'failed') as unknown as {
      status: unknown;
      events: { name: string; attributes: { key: string }[] }[];
    };
    expect(failed.status).toEqual({ code: 2, message: 'redis went away' });
    expect(failed.events[0]!.name).toBe('exception');
    expect(failed.events[0]!.attributes.map((a) => a.key)).toEqual([
      'exception.type',
      'exception.message',
      'exception.stacktrace',
    ]);
    const changed = of(spans, 'changed') as unknown as { links: { spanId: string }[] };
    expect(changed.links.map((l) => l.spanId)).toEqual(['2222222222222222']);
  });
});

function of(spans: OtlpSpan[], name: string): OtlpSpan {
  return spans.find((s) => s.attributes.some((a) => a.key === 'ctxflow.case' && a.value.stringValue === name))!;
}
