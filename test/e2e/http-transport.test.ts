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
import { mkdtemp, rm } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { parseApiKeys } from '@ctxflow/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const KEY = 'transport-key';
const AUTH = { authorization: `Bearer ${KEY}` };
const JSON_TYPE = { 'content-type': 'application/json' };

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
