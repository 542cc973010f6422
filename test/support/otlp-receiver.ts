/**
 * An in-process OTLP/HTTP receiver for tests: a node http server on port 0
 * accepting `http/json` exports on /v1/traces, /v1/logs and /v1/metrics (what
 * `OTEL_EXPORTER_OTLP_PROTOCOL=http/json` sends), flattened into spans and log
 * records with their resource's `service.name`. Ids are the lowercase hex the
 * JSON encoding uses.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { gunzipSync } from 'node:zlib';

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
};
type KeyValue = { key: string; value?: AnyValue };

export interface ReceivedSpan {
  service: string;
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  links: { traceId: string; spanId: string }[];
}

export interface ReceivedLogRecord {
  service: string;
  eventName: string | undefined;
  severityNumber: number | undefined;
  body: string | undefined;
  attributes: Record<string, string | number | boolean>;
  traceId: string | undefined;
  spanId: string | undefined;
}

function value(v: AnyValue | undefined): string | number | boolean {
  if (!v) return '';
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  return '';
}

function attributesOf(list: KeyValue[] | undefined): Record<string, string | number | boolean> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, value(kv.value)]));
}

const empty = (id: string | undefined) => (id && !/^0*$/.test(id) ? id : undefined);

async function bodyOf(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  let raw = Buffer.concat(chunks);
  if (request.headers['content-encoding'] === 'gzip') raw = gunzipSync(raw);
  return JSON.parse(raw.toString('utf8'));
}

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly logs: ReceivedLogRecord[] = [];
  /** Metric names received, with the service that sent them. */
  readonly metrics: { service: string; name: string }[] = [];
  /** Requests that were not OTLP JSON (content type, path or body), for failure output. */
  readonly refused: string[] = [];
  readonly #server: Server;
  #url = '';

  private constructor() {
    this.#server = createServer((request, response) => {
      void this.#receive(request).then(
        () => {
          response.writeHead(200, { 'content-type': 'application/json' });
          response.end('{}');
        },
        (err: Error) => {
          this.refused.push(`${request.method} ${request.url} ${request.headers['content-type']}: ${err.message}`);
          response.writeHead(400, { 'content-type': 'application/json' });
          response.end('{}');
        },
      );
    });
  }

  static async start(): Promise<OtlpReceiver> {
    const receiver = new OtlpReceiver();
    await new Promise<void>((resolve) => receiver.#server.listen(0, '127.0.0.1', resolve));
    const address = receiver.#server.address();
    if (typeof address !== 'object' || !address) throw new Error('the OTLP receiver has no address');
    receiver.#url = `http://127.0.0.1:${address.port}`;
    return receiver;
  }

  /** The base URL for `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  get url(): string {
    return this.#url;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #receive(request: IncomingMessage): Promise<void> {
    if (request.method !== 'POST') throw new Error('not a POST');
    if (!String(request.headers['content-type']).startsWith('application/json')) throw new Error('not http/json');
    const body = (await bodyOf(request)) as Record<string, unknown>;
    switch (request.url) {
      case '/v1/traces':
        for (const rs of (body.resourceSpans ?? []) as {
          resource?: { attributes?: KeyValue[] };
          scopeSpans?: {
            spans?: {
              name: string;
              traceId: string;
              spanId: string;
              parentSpanId?: string;
              kind?: number;
              attributes?: KeyValue[];
              links?: { traceId: string; spanId: string }[];
            }[];
          }[];
        }[]) {
          const service = String(attributesOf(rs.resource?.attributes)['service.name'] ?? '');
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              this.spans.push({
                service,
                name: s.name,
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: empty(s.parentSpanId),
                kind: s.kind ?? 0,
                attributes: attributesOf(s.attributes),
                links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
              });
            }
          }
        }
        return;
      case '/v1/logs':
        for (const rl of (body.resourceLogs ?? []) as {
          resource?: { attributes?: KeyValue[] };
          scopeLogs?: {
            logRecords?: {
              eventName?: string;
              severityNumber?: number;
              body?: AnyValue;
              attributes?: KeyValue[];
              traceId?: string;
              spanId?: string;
            }[];
          }[];
        }[]) {
          const service = String(attributesOf(rl.resource?.attributes)['service.name'] ?? '');
          for (const sl of rl.scopeLogs ?? []) {
            for (const r of sl.logRecords ?? []) {
              this.logs.push({
                service,
                eventName: r.eventName,
                severityNumber: r.severityNumber,
                body: r.body === undefined ? undefined : String(value(r.body)),
                attributes: attributesOf(r.attributes),
                traceId: empty(r.traceId),
                spanId: empty(r.spanId),
              });
            }
          }
        }
        return;
      case '/v1/metrics':
        for (const rm of (body.resourceMetrics ?? []) as {
          resource?: { attributes?: KeyValue[] };
          scopeMetrics?: { metrics?: { name: string }[] }[];
        }[]) {
          const service = String(attributesOf(rm.resource?.attributes)['service.name'] ?? '');
          for (const sm of rm.scopeMetrics ?? [])
            for (const m of sm.metrics ?? []) this.metrics.push({ service, name: m.name });
        }
        return;
      default:
        throw new Error('unknown OTLP path');
    }
  }
}
