/**
 * API keys from a file (`CTXFLOW_API_KEYS_FILE`) and the scopes of every route: plain and
 * hashed keys, scopes named per key, a change applied with no restart (a removed key refused
 * within seconds), a bad file refused at startup naming its line (never the key) and a bad
 * reload keeping the keys in use; `CTXFLOW_API_KEYS` beside the file.
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import {
  ApiKeyRing,
  type ConfigError,
  createIdentity,
  createLogger,
  parseKeyFile,
  sha256Hex,
} from '@ctxflow/service-kit';
import { buildRunnerApp, createEngine, loadRunnerConfig, MemorySessionStore } from '@ctxflow/session-runner';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'ctxflow-keys-'));
const file = join(dir, 'api-keys');
const HASHED_KEY = 'hashed-key-of-acme-0123456789';
const KEYS = {
  acme: 'acme-plain-key-0123456789',
  reader: 'acme-reader-key-0123456789',
  writer: 'acme-writer-key-0123456789',
  admin: 'acme-admin-key-0123456789',
  globex: 'globex-key-0123456789',
  env: 'env-key-0123456789',
};

function keyFile(lines: string[]): void {
  // Written beside, then renamed over: the way editors and Kubernetes replace a file.
  writeFileSync(`${file}.tmp`, `${lines.join('\n')}\n`);
  renameSync(`${file}.tmp`, file);
}

const FULL = [
  '# tenant:key [scopes]',
  `acme:${KEYS.acme}`,
  `acme:sha256:${sha256Hex(HASHED_KEY)}   # a hashed key: the file never holds it`,
  `acme:${KEYS.reader} ctxflow:read`,
  `acme:${KEYS.writer} ctxflow:read ctxflow:write`,
  `acme:${KEYS.admin} ctxflow:read ctxflow:write ctxflow:admin`,
  '',
  `globex:${KEYS.globex}`,
];

let closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const close of closers.reverse()) await close();
  closers = [];
});

async function runner(env: Record<string, string> = {}) {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(...String(chunk).trim().split('\n'));
      done();
    },
  });
  const log = createLogger({ service: 'test', destination: sink });
  const config = loadRunnerConfig({ CTXFLOW_API_KEYS_FILE: file, ...env });
  const identity = createIdentity(config.identity, { log });
  const app = buildRunnerApp({
    engine: createEngine({ store: new MemorySessionStore() }),
    authenticate: identity.authenticate,
  });
  await app.ready();
  closers.push(
    () => identity.close(),
    () => app.close(),
  );
  return { app, identity, lines };
}

async function call(app: FastifyInstance, method: 'GET' | 'POST' | 'DELETE', url: string, key: string, body?: object) {
  const response = await app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${key}` },
    ...(body ? { payload: body } : {}),
  });
  return { status: response.statusCode, body: response.body ? response.json() : undefined };
}

describe('CTXFLOW_API_KEYS_FILE', () => {
  it('plain and sha256 entries are keys of their tenant; tenants stay apart; no key or a wrong one is 401', async () => {
    keyFile(FULL);
    const { app } = await runner();
    const created = await call(app, 'POST', '/sessions', KEYS.acme, {});
    expect(created.status).toBe(201);
    const viaHash = await call(app, 'GET', `/sessions/${created.body.sessionId}`, HASHED_KEY);
    expect(viaHash.status).toBe(200);
    expect((await call(app, 'GET', `/sessions/${created.body.sessionId}`, KEYS.globex)).status).toBe(404);
    const wrong = await call(app, 'GET', '/sessions', 'not-a-key');
    expect(wrong).toEqual({
      status: 401,
      body: { error: { code: 'unauthorized', message: 'unknown API key', retryable: false } },
    });
    // The sha256: form is the key's hash, not a key: presenting the hex is refused.
    expect((await call(app, 'GET', '/sessions', `sha256:${sha256Hex(HASHED_KEY)}`)).status).toBe(401);
  });

  it('a key naming scopes has only those: 403 forbidden for the rest, and nothing is written', async () => {
    keyFile(FULL);
    const { app } = await runner();
    expect((await call(app, 'GET', '/sessions', KEYS.reader)).status).toBe(200);
    const refused = await call(app, 'POST', '/sessions', KEYS.reader, {});
    expect(refused).toEqual({
      status: 403,
      body: { error: { code: 'forbidden', message: 'this request needs the ctxflow:write scope', retryable: false } },
    });
    const agent = await call(app, 'POST', '/agents', KEYS.reader, { context: 'x' });
    expect(agent.status).toBe(403);
    expect((await call(app, 'GET', '/sessions', KEYS.acme)).body).toEqual({ sessions: [] });

    // Erasure with cascade is an administrator's: the writer is refused and the agent stays.
    const { body } = await call(app, 'POST', '/agents', KEYS.writer, { context: 'the agent' });
    await call(app, 'POST', '/sessions', KEYS.writer, { agentId: body.agentId });
    const cascade = await call(app, 'DELETE', `/agents/${body.agentId}?cascade=true`, KEYS.writer);
    expect(cascade).toEqual({
      status: 403,
      body: { error: { code: 'forbidden', message: 'this request needs the ctxflow:admin scope', retryable: false } },
    });
    expect((await call(app, 'GET', `/agents/${body.agentId}`, KEYS.acme)).status).toBe(200);
    expect((await call(app, 'GET', '/sessions', KEYS.acme)).body.sessions).toHaveLength(1);
    expect((await call(app, 'DELETE', `/agents/${body.agentId}?cascade=true`, KEYS.admin)).status).toBe(204);
    expect((await call(app, 'GET', `/agents/${body.agentId}`, KEYS.acme)).status).toBe(404);
    expect((await call(app, 'GET', '/sessions', KEYS.acme)).body).toEqual({ sessions: [] });
    // A key without scopes holds every one.
    expect((await call(app, 'DELETE', '/agents/none?cascade=true', KEYS.globex)).status).toBe(204);
  });

  it('a removed key is refused, an added key accepted, with no restart (within 5 s)', async () => {
    keyFile(FULL);
    const { app, lines } = await runner();
    expect((await call(app, 'GET', '/sessions', KEYS.globex)).status).toBe(200);
    const added = 'globex-added-key-0123456789';
    keyFile([...FULL.filter((l) => !l.includes(KEYS.globex)), `globex:${added}`]);
    await vi.waitFor(
      async () => {
        expect((await call(app, 'GET', '/sessions', KEYS.globex)).status).toBe(401);
      },
      { timeout: 5_000, interval: 100 },
    );
    expect((await call(app, 'GET', '/sessions', added)).status).toBe(200);
    expect((await call(app, 'GET', '/sessions', KEYS.acme)).status).toBe(200);
    const reload = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'API key file: reloaded');
    expect(reload).toMatchObject({ file, keys: 6 });
  });

  it('a bad reload keeps the keys in use and logs the file and line, never the key', async () => {
    keyFile(FULL);
    const { app, lines } = await runner();
    const secretish = 'a-key-on-a-bad-line-0123456789';
    keyFile([`globex:${KEYS.globex}`, `acme:${secretish} ctxflow:everything`]);
    await vi.waitFor(() => expect(lines.some((l) => l.includes('reload refused'))).toBe(true), {
      timeout: 5_000,
      interval: 100,
    });
    const refused = JSON.parse(lines.find((l) => l.includes('reload refused'))!);
    expect(refused.problem).toBe(
      `${file} line 2: 1 unknown scope(s): the scopes are ctxflow:read, ctxflow:write, ctxflow:admin`,
    );
    expect(lines.join('\n')).not.toContain(secretish);
    expect((await call(app, 'GET', '/sessions', KEYS.acme)).status).toBe(200);
    rmSync(file);
    await vi.waitFor(() => expect(lines.some((l) => l.includes('cannot be read (ENOENT)'))).toBe(true), {
      timeout: 5_000,
      interval: 100,
    });
    expect((await call(app, 'GET', '/sessions', KEYS.acme)).status).toBe(200);
  });

  it('CTXFLOW_API_KEYS keeps working beside the file, and is kept across reloads', async () => {
    keyFile(FULL);
    const { app } = await runner({ CTXFLOW_API_KEYS: `envtenant:${KEYS.env}` });
    expect((await call(app, 'GET', '/sessions', KEYS.env)).status).toBe(200);
    keyFile([`acme:${KEYS.acme}`]);
    await vi.waitFor(async () => expect((await call(app, 'GET', '/sessions', KEYS.globex)).status).toBe(401), {
      timeout: 5_000,
      interval: 100,
    });
    expect((await call(app, 'GET', '/sessions', KEYS.env)).status).toBe(200);
  });

  it('a bad file at startup is a configuration error naming the file and each bad line, never the key', () => {
    const secret = 'startup-secret-key-0123456789';
    keyFile([
      `acme:${KEYS.acme}`,
      `nocolon${secret}`,
      `acme:sha256:abc${secret.length}`,
      `globex:${secret} ctxflow:root`,
      `acme:${KEYS.acme}`,
      `globex:${KEYS.acme}`,
    ]);
    let error: ConfigError | undefined;
    try {
      loadRunnerConfig({ CTXFLOW_API_KEYS_FILE: file, CTXFLOW_HOST: '0.0.0.0' });
    } catch (err) {
      error = err as ConfigError;
    }
    expect(error?.problems).toEqual([
      `CTXFLOW_API_KEYS_FILE: ${file} line 2: expected tenant:key or tenant:sha256:<64 hex digits>, then optional scopes; ` +
        `${file} line 3: a sha256: entry takes the 64 hex digits of the key's SHA-256; ` +
        `${file} line 4: 1 unknown scope(s): the scopes are ctxflow:read, ctxflow:write, ctxflow:admin; ` +
        `${file} line 5: the same key is listed twice; ` +
        `${file} line 6: the same key is given to tenants "acme" and "globex": a key names one tenant`,
    ]);
    expect(error?.message).not.toContain(secret);
    expect(error?.message).not.toContain(KEYS.acme);
    expect(() => loadRunnerConfig({ CTXFLOW_API_KEYS_FILE: join(dir, 'absent') })).toThrow(
      `CTXFLOW_API_KEYS_FILE: ${join(dir, 'absent')}: cannot be read (ENOENT)`,
    );
  });

  it('with a key file set, a non-loopback host is allowed (keys are required)', () => {
    keyFile(FULL);
    expect(loadRunnerConfig({ CTXFLOW_API_KEYS_FILE: file, CTXFLOW_HOST: '0.0.0.0' }).host).toBe('0.0.0.0');
  });

  it('lookup is one Map read by the SHA-256 of the presented key', () => {
    const entries = parseKeyFile(FULL.join('\n'), 'keys');
    const ring = new ApiKeyRing(entries);
    const get = vi.spyOn(Map.prototype, 'get');
    expect(ring.lookup(HASHED_KEY)?.tenant).toBe('acme');
    expect(ring.lookup('unknown')).toBeUndefined();
    expect(get.mock.calls.map(([hash]) => hash)).toEqual([sha256Hex(HASHED_KEY), sha256Hex('unknown')]);
    get.mockRestore();
    expect(entries.map((e) => [e.tenant, e.keyId, [...e.scopes]])).toEqual([
      ['acme', sha256Hex(KEYS.acme).slice(0, 12), ['ctxflow:read', 'ctxflow:write', 'ctxflow:admin']],
      ['acme', sha256Hex(HASHED_KEY).slice(0, 12), ['ctxflow:read', 'ctxflow:write', 'ctxflow:admin']],
      ['acme', sha256Hex(KEYS.reader).slice(0, 12), ['ctxflow:read']],
      ['acme', sha256Hex(KEYS.writer).slice(0, 12), ['ctxflow:read', 'ctxflow:write']],
      ['acme', sha256Hex(KEYS.admin).slice(0, 12), ['ctxflow:read', 'ctxflow:write', 'ctxflow:admin']],
      ['globex', sha256Hex(KEYS.globex).slice(0, 12), ['ctxflow:read', 'ctxflow:write', 'ctxflow:admin']],
    ]);
  });
});
