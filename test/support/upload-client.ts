/**
 * An HTTP client in its own process (the server under test is in another one, as in
 * production: a client in the server's own event loop never writes while the server
 * closes). Sends one JSON body `tries` times, each on a new connection, and prints one
 * JSON line per try: `{ status, connection, text }`, or `{ error }` with the client's
 * error code when the request failed.
 *
 *   node test/support/upload-client.ts '<Upload as JSON>'
 */
import { request as httpRequest } from 'node:http';

export interface Upload {
  client: 'fetch' | 'node:http';
  url: string;
  method: string;
  headers: Record<string, string>;
  /** The body's size in bytes: `{"<field>":"xxx..."}`. */
  bytes: number;
  field: string;
  tries: number;
  /** node:http only: chunked instead of a content-length. */
  chunked?: boolean;
}

export interface TryResult {
  status?: number;
  connection?: string | null;
  text?: string;
  error?: string;
}

function bodyOf(bytes: number, field: string): Buffer {
  const prefix = `{"${field}":"`;
  return Buffer.from(`${prefix}${'x'.repeat(bytes - prefix.length - 2)}"}`);
}

function errorCode(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? (err as { code?: string }).code ?? cause?.message ?? String(err);
}

async function withFetch(upload: Upload, body: Buffer): Promise<TryResult> {
  const answer = await fetch(upload.url, { method: upload.method, headers: upload.headers, body });
  return { status: answer.status, connection: answer.headers.get('connection'), text: await answer.text() };
}

function withNodeHttp(upload: Upload, body: Buffer): Promise<TryResult> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...upload.headers };
    if (!upload.chunked) headers['content-length'] = body.length;
    const req = httpRequest(upload.url, { method: upload.method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          connection: res.headers.connection ?? null,
          text: Buffer.concat(chunks).toString('utf8'),
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(20_000, () => req.destroy(new Error('no answer within 20 s')));
    for (let at = 0; at < body.length; at += 64 * 1024) req.write(body.subarray(at, at + 64 * 1024));
    req.end();
  });
}

const upload = JSON.parse(process.argv[2] ?? '{}') as Upload;
const body = bodyOf(upload.bytes, upload.field);
for (let i = 0; i < upload.tries; i++) {
  let result: TryResult;
  try {
    result = upload.client === 'fetch' ? await withFetch(upload, body) : await withNodeHttp(upload, body);
  } catch (err) {
    result = { error: errorCode(err) };
  }
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
