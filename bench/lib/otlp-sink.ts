/**
 * An OTLP/HTTP receiver on 127.0.0.1:0 that answers every export 200 (an empty
 * response, which is a valid Export*ServiceResponse) and keeps the trace
 * request bodies, so a benchmark can check afterwards, outside its timing,
 * that the spans it expected were exported and whose children they are.
 *
 * Only counts are kept for metrics and logs. Both OTLP/HTTP encodings are
 * taken, by content type, and answered in kind: `application/json`
 * (http/json: the ExportTraceServiceRequest as OTLP JSON, ids in hex) is
 * parsed as JSON; anything else is read as protobuf with a minimal reader
 * (ExportTraceServiceRequest -> ResourceSpans -> ScopeSpans -> Span:
 * trace_id 1, parent_span_id 4, name 5).
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import { gunzipSync } from 'node:zlib';

/** A span as the sink decoded it (ids in lowercase hex; parent empty for a root span). */
export interface ExportedSpan {
  traceId: string;
  parentSpanId: string;
  name: string;
}

export interface OtlpSink {
  /** The base URL for OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string;
  /** Export requests received, by path (`/v1/traces`, `/v1/metrics`, `/v1/logs`). */
  requests(): Record<string, number>;
  /** Every span received so far (decoded now; call outside any timing). */
  spans(): ExportedSpan[];
  close(): Promise<void>;
}

/** A trace export request as received (gunzipped): OTLP JSON or protobuf. */
interface TraceBody {
  json: boolean;
  body: Buffer;
}

export async function startOtlpSink(): Promise<OtlpSink> {
  const requests: Record<string, number> = {};
  const traceBodies: TraceBody[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    const json = String(request.headers['content-type'] ?? '').startsWith('application/json');
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const path = request.url ?? '/';
      requests[path] = (requests[path] ?? 0) + 1;
      if (path === '/v1/traces') {
        const body = Buffer.concat(chunks);
        traceBodies.push({ json, body: request.headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body });
      }
      // An empty Export*ServiceResponse in the request's encoding.
      if (json) response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    requests: () => ({ ...requests }),
    spans: () =>
      traceBodies.flatMap(({ json, body }) => (json ? decodeJsonTraceRequest(body) : decodeTraceRequest(body))),
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

interface Field {
  no: number;
  /** Length-delimited fields only: the bytes. */
  bytes?: Uint8Array;
}

/** The top-level fields of one protobuf message (varint, fixed and length-delimited). */
function* fields(buf: Uint8Array): Generator<Field> {
  let pos = 0;
  const varint = (): number => {
    let result = 0;
    let shift = 0;
    for (;;) {
      const byte = buf[pos++]!;
      result += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return result;
      shift += 7;
    }
  };
  while (pos < buf.length) {
    const tag = varint();
    const no = Math.floor(tag / 8);
    const wire = tag & 7;
    if (wire === 0) varint();
    else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else if (wire === 2) {
      const length = varint();
      yield { no, bytes: buf.subarray(pos, pos + length) };
      pos += length;
      continue;
    } else throw new Error(`protobuf wire type ${wire} not expected in an OTLP trace request`);
    yield { no };
  }
}

function* children(buf: Uint8Array, no: number): Generator<Uint8Array> {
  for (const field of fields(buf)) if (field.no === no && field.bytes) yield field.bytes;
}

const hex = (bytes: Uint8Array | undefined) => (bytes ? Buffer.from(bytes).toString('hex') : '');

function decodeTraceRequest(body: Uint8Array): ExportedSpan[] {
  const spans: ExportedSpan[] = [];
  for (const resourceSpans of children(body, 1)) {
    for (const scopeSpans of children(resourceSpans, 2)) {
      for (const span of children(scopeSpans, 2)) {
        const decoded: ExportedSpan = { traceId: '', parentSpanId: '', name: '' };
        for (const field of fields(span)) {
          if (field.no === 1) decoded.traceId = hex(field.bytes);
          if (field.no === 4) decoded.parentSpanId = hex(field.bytes);
          if (field.no === 5) decoded.name = Buffer.from(field.bytes ?? []).toString('utf8');
        }
        spans.push(decoded);
      }
    }
  }
  return spans;
}

/** An ExportTraceServiceRequest in OTLP JSON: the fields read here (ids are hex strings). */
interface JsonTraceRequest {
  resourceSpans?: {
    scopeSpans?: { spans?: { traceId?: string; parentSpanId?: string; name?: string }[] }[];
  }[];
}

function decodeJsonTraceRequest(body: Buffer): ExportedSpan[] {
  const request = JSON.parse(body.toString('utf8')) as JsonTraceRequest;
  const spans: ExportedSpan[] = [];
  for (const resourceSpans of request.resourceSpans ?? []) {
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        spans.push({
          traceId: (span.traceId ?? '').toLowerCase(),
          parentSpanId: (span.parentSpanId ?? '').toLowerCase(),
          name: span.name ?? '',
        });
      }
    }
  }
  return spans;
}
