/**
 * The HTTP transport over a real listening socket (the embedded app on port 0), as the
 * clients people use send it: Node's `fetch` (undici), `node:http` and curl.
 *
 * - A JSON request with an empty body is a request without a body: a DELETE, a GET or a
 *   POST whose body is optional is answered as if no body was sent; a route that needs a
 *   body answers 400 `validation_error` naming the body.
 * - A body over a limit (4 MiB, 2 MiB on the context routes, 256 KiB on the feeds) is
 *   answered 413 `payload_too_large` in the error form with `connection: close`, and the
 *   client reads that answer: the server reads the rest of the upload before it closes
 *   the connection, so no client sees EPIPE or ECONNRESET instead.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_CONTEXT_BODY_BYTES } from '@ctxflow/contracts';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { parseApiKeys } from '@ctxflow/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TryResult, Upload } from '../support/upload-client.ts';

const KEY = 'transport-key';
const AUTH = { authorization: `Bearer ${KEY}` };
const JSON_TYPE = { 'content-type': 'application/json' };
const BODY_LIMIT = 4 * 1024 * 1024;
const FEED_LIMIT = 256 * 1024;
const UPLOAD_CLIENT = join(import.meta.dirname, '../support/upload-client.ts');

const TOO_LARGE = {
  error: { code: 'payload_too_large', message: 'request body is over the size limit', retryable: false },
};

let embedded: EmbeddedApp;
let base = '';
let port = 0;
let dir = '';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** One request on its own connection with node:http; `body` is written in 64 KiB chunks. */
function nodeRequest(
  method: string,
  path: string,
  headers: Record<string, string | number>,
  body?: Buffer,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, agent: false, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(20_000, () => req.destroy(new Error(`${method} ${path}: no answer within 20 s`)));
    if (body) {
      for (let at = 0; at < body.length; at += 64 * 1024) req.write(body.subarray(at, at + 64 * 1024));
    }
    req.end();
  });
}

/** curl, spawned: status, headers and body of its answer. */
function curl(args: string[]): Promise<{ code: number | null; status: number; headers: string; text: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('curl', ['-sS', '--max-time', '20', '-D', '-', ...args]);
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString('utf8');
    });
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString('utf8');
    });
    child.on('error', reject);
    child.on('close', (code) => {
      // -D - writes every header block (a 100 Continue first) before the body.
      const blocks = out.split('\r\n\r\n');
      const text = blocks.pop() ?? '';
      const headers = blocks.filter((b) => !b.startsWith('HTTP/1.1 100')).join('\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(headers)?.[1] ?? 0);
      resolve({ code, status, headers: `${headers}\n${err}`, text });
    });
  });
}

async function createSession(): Promise<string> {
  const answer = await fetch(`${base}/sessions`, { method: 'POST', headers: { ...AUTH, ...JSON_TYPE }, body: '{}' });
  expect(answer.status).toBe(201);
  return ((await answer.json()) as { sessionId: string }).sessionId;
}

async function createAgent(): Promise<string> {
  const answer = await fetch(`${base}/agents`, { method: 'POST', headers: { ...AUTH, ...JSON_TYPE }, body: '{}' });
  expect(answer.status).toBe(201);
  return ((await answer.json()) as { agentId: string }).agentId;
}

/** A JSON body of `bytes` bytes: one string field. */
function bodyOf(bytes: number, field = 'content'): Buffer {
  const prefix = `{"${field}":"`;
  return Buffer.from(`${prefix}${'x'.repeat(bytes - prefix.length - 2)}"}`);
}

beforeAll(async () => {
  embedded = await buildEmbeddedApp({
    config: { apiKeys: parseApiKeys(`transport:${KEY}`), secrets: { generic: 'transport-generic-secret' } },
  });
  await embedded.app.listen({ host: '127.0.0.1', port: 0 });
  port = (embedded.app.server.address() as { port: number }).port;
  base = `http://127.0.0.1:${port}`;
  dir = await mkdtemp(join(tmpdir(), 'ctxflow-transport-'));
});

afterAll(async () => {
  await embedded?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('a JSON request with an empty body', () => {
  /** The two ways a client sends an empty body: `content-length: 0`, or chunked with no chunk. */
  const framings: [string, Record<string, string>][] = [
    ['content-length: 0', { 'content-length': '0' }],
    ['an empty chunked body', { 'transfer-encoding': 'chunked' }],
  ];

  it.each(framings)('DELETE /sessions/:id with %s erases the session: 204, then 404', async (_what, framing) => {
    const sessionId = await createSession();
    const erased = await nodeRequest('DELETE', `/sessions/${sessionId}`, { ...AUTH, ...JSON_TYPE, ...framing });
    expect(erased.status, erased.text).toBe(204);
    expect(erased.text).toBe('');
    const gone = await nodeRequest('GET', `/sessions/${sessionId}`, AUTH);
    expect(gone.status).toBe(404);
    expect(JSON.parse(gone.text).error.code).toBe('state_session_not_found');
  });

  it.each(framings)('GET and DELETE on other routes with %s answer as without a body', async (_what, framing) => {
    const sessionId = await createSession();
    const agentId = await createAgent();
    const headers = { ...AUTH, ...JSON_TYPE, ...framing };
    const read = await nodeRequest('GET', `/sessions/${sessionId}`, headers);
    expect(read.status, read.text).toBe(200);
    expect(JSON.parse(read.text).sessionId).toBe(sessionId);
    const listed = await nodeRequest('GET', '/sessions', headers);
    expect(listed.status, listed.text).toBe(200);
    const subscribed = await fetch(`${base}/sessions/${sessionId}/subscriptions`, {
      method: 'POST',
      headers: { ...AUTH, ...JSON_TYPE },
      body: JSON.stringify({ source: 'generic', ticket: 'T-1' }),
    });
    expect(subscribed.status).toBe(201);
    const unsubscribed = await nodeRequest(
      'DELETE',
      `/sessions/${sessionId}/subscriptions?source=generic&ticket=T-1`,
      headers,
    );
    expect(unsubscribed.status, unsubscribed.text).toBe(200);
    expect(JSON.parse(unsubscribed.text)).toEqual({
      sessionId,
      subscription: { source: 'generic', ticket: 'T-1' },
      removed: true,
    });
    const agentErased = await nodeRequest('DELETE', `/agents/${agentId}`, headers);
    expect(agentErased.status, agentErased.text).toBe(204);
    expect((await nodeRequest('GET', `/agents/${agentId}`, AUTH)).status).toBe(404);
  });

  it.each(framings)('POST steps, runs/restart and branches with %s take the default body', async (_what, framing) => {
    const sessionId = await createSession();
    const headers = { ...AUTH, ...JSON_TYPE, ...framing };
    const stepped = await nodeRequest('POST', `/sessions/${sessionId}/steps`, headers);
    expect(stepped.status, stepped.text).toBe(200);
    expect(JSON.parse(stepped.text).stepId).toEqual(expect.any(String));
    const restarted = await nodeRequest('POST', `/sessions/${sessionId}/runs/restart`, headers);
    expect(restarted.status, restarted.text).toBe(200);
    expect(JSON.parse(restarted.text).stepId).toEqual(expect.any(String));
    const branched = await nodeRequest('POST', `/sessions/${sessionId}/branches`, headers);
    expect(branched.status, branched.text).toBe(201);
    const branchId = JSON.parse(branched.text).sessionId as string;
    expect((await nodeRequest('GET', `/sessions/${branchId}`, AUTH)).status).toBe(200);
  });

  it('fetch POST with a JSON content-type and no body (content-length: 0) takes the default body', async () => {
    const sessionId = await createSession();
    const stepped = await fetch(`${base}/sessions/${sessionId}/steps`, {
      method: 'POST',
      headers: { ...AUTH, ...JSON_TYPE },
    });
    expect(stepped.status).toBe(200);
    expect(((await stepped.json()) as { stepId: string }).stepId).toEqual(expect.any(String));
    const erased = await fetch(`${base}/sessions/${sessionId}`, {
      method: 'DELETE',
      headers: { ...AUTH, ...JSON_TYPE },
      body: '',
    });
    expect(erased.status).toBe(204);
  });

  it.each(framings)(
    'a route that needs a body answers 400 validation_error naming the body (%s)',
    async (_what, framing) => {
      const sessionId = await createSession();
      const agentId = await createAgent();
      const headers = { ...AUTH, ...JSON_TYPE, ...framing };
      for (const [method, path] of [
        ['POST', '/context'],
        ['POST', `/agents/${agentId}/memories`],
        ['POST', `/sessions/${sessionId}/messages`],
        ['POST', `/sessions/${sessionId}/rewind`],
        ['PATCH', `/sessions/${sessionId}`],
      ] as const) {
        const answer = await nodeRequest(method, path, headers);
        expect(answer.status, `${method} ${path}: ${answer.text}`).toBe(400);
        expect(JSON.parse(answer.text)).toEqual({
          error: {
            code: 'validation_error',
            message: 'body: Invalid input: expected object, received undefined',
            retryable: false,
            details: [{ path: [], message: 'Invalid input: expected object, received undefined' }],
          },
        });
      }
      const messages = await nodeRequest('GET', `/sessions/${sessionId}/messages`, AUTH);
      expect(JSON.parse(messages.text)).toEqual({ messages: [] });
    },
  );
});

describe('a body over the limit is answered 413 on every client', () => {
  /** What every 413 answer is: the error form, and the connection closed after it. */
  function tooLarge(message = TOO_LARGE.error.message): TryResult {
    return { status: 413, connection: 'close', text: JSON.stringify({ error: { ...TOO_LARGE.error, message } }) };
  }

  /** Every try answered 413: the list shows which try got what. */
  function expectAllTooLarge(what: string, results: TryResult[], tries: number, message?: string) {
    expect(results, what).toEqual(Array.from({ length: tries }, () => tooLarge(message)));
  }

  /** `tries` uploads of `bytes` bytes from a client in its own process; every answer it read, or its error. */
  function upload(options: Omit<Upload, 'url' | 'headers'> & { path: string; headers?: Record<string, string> }) {
    const { path, headers = { ...AUTH, ...JSON_TYPE }, ...rest } = options;
    const spec: Upload = { ...rest, url: `${base}${path}`, headers };
    return new Promise<TryResult[]>((resolve, reject) => {
      execFile(
        process.execPath,
        [UPLOAD_CLIENT, JSON.stringify(spec)],
        { maxBuffer: 16 * 1024 * 1024, timeout: 120_000 },
        (err, stdout, stderr) => {
          if (err) reject(new Error(`${err.message}\n${stderr}`));
          else
            resolve(
              stdout
                .trim()
                .split('\n')
                .map((line) => JSON.parse(line) as TryResult),
            );
        },
      );
    });
  }

  it('fetch: 10 tries of 8 MiB to a 4 MiB route and 10 of 4 MiB to a 2 MiB route, each a 413', async () => {
    const agentId = await createAgent();
    const sessionId = await createSession();
    for (const [method, path, bytes, field] of [
      ['POST', `/agents/${agentId}/memories`, 2 * BODY_LIMIT, 'content'],
      ['PATCH', `/sessions/${sessionId}`, 2 * MAX_CONTEXT_BODY_BYTES, 'context'],
    ] as const) {
      const results = await upload({ client: 'fetch', method, path, bytes, field, tries: 10 });
      expectAllTooLarge(`${method} ${path}`, results, 10);
    }
    const memory = await fetch(`${base}/agents/${agentId}/memories`, {
      method: 'POST',
      headers: { ...AUTH, ...JSON_TYPE },
      body: JSON.stringify({ content: 'still served' }),
    });
    expect(memory.status).toBe(201);
    expect(
      ((await (await fetch(`${base}/sessions/${sessionId}`, { headers: AUTH })).json()) as { steps: number }).steps,
    ).toBe(0);
  });

  it('fetch: 10 tries of 64 MiB to a 4 MiB route, each a 413', async () => {
    const agentId = await createAgent();
    const results = await upload({
      client: 'fetch',
      method: 'POST',
      path: `/agents/${agentId}/memories`,
      bytes: 16 * BODY_LIMIT,
      field: 'content',
      tries: 10,
    });
    expectAllTooLarge('64 MiB', results, 10);
  });

  it('fetch: 10 tries of 4 MiB to a feed (its limit 256 KiB), each its 413', async () => {
    const results = await upload({
      client: 'fetch',
      method: 'POST',
      path: '/feeds/generic',
      headers: JSON_TYPE,
      bytes: 16 * FEED_LIMIT,
      field: 'summary',
      tries: 10,
    });
    expectAllTooLarge('/feeds/generic', results, 10, `body is over the ${FEED_LIMIT}-byte limit`);
  });

  it('node:http: 8 MiB to a 4 MiB route, 4 MiB to each 2 MiB context route, sized and chunked, 3 tries each', async () => {
    const agentId = await createAgent();
    const sessionId = await createSession();
    for (const [method, path, bytes, field] of [
      ['POST', `/agents/${agentId}/memories`, 2 * BODY_LIMIT, 'content'],
      ['POST', '/sessions', 2 * MAX_CONTEXT_BODY_BYTES, 'context'],
      ['PATCH', `/sessions/${sessionId}`, 2 * MAX_CONTEXT_BODY_BYTES, 'context'],
      ['PATCH', `/agents/${agentId}`, 2 * MAX_CONTEXT_BODY_BYTES, 'context'],
    ] as const) {
      for (const chunked of [false, true]) {
        const results = await upload({ client: 'node:http', method, path, bytes, field, tries: 3, chunked });
        expectAllTooLarge(`${method} ${path} chunked=${chunked}`, results, 3);
      }
    }
    const agent = (await (await fetch(`${base}/agents/${agentId}`, { headers: AUTH })).json()) as { version: number };
    expect(agent.version).toBe(1);
  });

  it('curl: 8 MiB to a 4 MiB route and 4 MiB to a 2 MiB route, with and without Expect: 100-continue', async () => {
    const agentId = await createAgent();
    const large = join(dir, 'large.json');
    const context = join(dir, 'context.json');
    await writeFile(large, bodyOf(2 * BODY_LIMIT));
    await writeFile(context, bodyOf(2 * MAX_CONTEXT_BODY_BYTES, 'context'));
    for (const [method, path, file] of [
      ['POST', `/agents/${agentId}/memories`, large],
      ['POST', '/sessions', context],
    ] as const) {
      for (const expect100 of [[], ['-H', 'expect:']]) {
        for (let i = 0; i < 3; i++) {
          const answer = await curl([
            '-X',
            method,
            '-H',
            `authorization: Bearer ${KEY}`,
            '-H',
            'content-type: application/json',
            ...expect100,
            '--data-binary',
            `@${file}`,
            `${base}${path}`,
          ]);
          expect(answer.code, answer.headers).toBe(0);
          const connection = /^connection: (.*)$/im.exec(answer.headers)?.[1]?.trim();
          expect({ status: answer.status, connection, text: answer.text }, `curl ${method} ${path} try ${i}`).toEqual(
            tooLarge(),
          );
        }
      }
    }
  });

  it('an upload that goes on far past the limit is cut off within its bounds, after its 413', async () => {
    // Declares 1 GiB and writes 64 KiB every millisecond: the server answers, reads on only
    // within its bounds, then closes the connection; the client has its answer before that.
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    socket.write(
      `POST /agents/none/memories HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${KEY}\r\n` +
        `content-type: application/json\r\ncontent-length: ${1024 ** 3}\r\n\r\n`,
    );
    let received = '';
    socket.on('data', (c: Buffer) => {
      received += c.toString('utf8');
    });
    socket.on('error', () => {});
    const started = performance.now();
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const writer = setInterval(() => {
      if (socket.writable) socket.write(chunk);
    }, 1);
    await new Promise<void>((resolve) => socket.once('close', () => resolve()));
    clearInterval(writer);
    const elapsed = performance.now() - started;
    expect(received).toMatch(/^HTTP\/1\.1 413 /);
    expect(received).toMatch(/\r\nconnection: close\r\n/i);
    expect(received.slice(received.indexOf('\r\n\r\n') + 4)).toBe(JSON.stringify(TOO_LARGE));
    expect(elapsed).toBeLessThan(15_000);
  });
});
