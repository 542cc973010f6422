/**
 * Audit lines: every change of who can see what (agent and session creation and erasure, a
 * branch, subscription changes, a key file reload) is one structured log line on the
 * service's logger with tenant, subject, action, target and outcome; a refusal is one too.
 * No key and no token ever reaches the log.
 */

import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { buildEmbeddedApp } from '@ctxflow/embedded';
import {
  createAuditLog,
  createIdentity,
  createLogger,
  isLoopback,
  parseApiKeys,
  parseConfigWithAuth,
  sha256Hex,
} from '@ctxflow/service-kit';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';

const KEY = 'audited-api-key-0123456789abcdef';
const READER = 'audited-reader-key-0123456789abcdef';
const file = join(mkdtempSync(join(tmpdir(), 'ctxflow-audit-')), 'keys');
let server: Server;
let issuer: string;
let token: string;

beforeAll(async () => {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'a1', alg: 'ES256' }] };
  server = createServer((_request, response) => {
    response.setHeader('content-type', 'application/json');
    response.end(JSON.stringify(jwks));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  token = await new SignJWT({ tenant: 'acme', scope: 'ctxflow:read ctxflow:write' })
    .setProtectedHeader({ alg: 'ES256', kid: 'a1' })
    .setIssuer(issuer)
    .setAudience('ctxflow')
    .setSubject('alice@example.com')
    .setExpirationTime('5m')
    .sign(privateKey);
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('audit lines', () => {
  it('one line per change with tenant, subject, action, target and outcome; never a key or a token', async () => {
    writeFileSync(file, `acme:${KEY}\nacme:${READER} ctxflow:read\n`);
    const text: string[] = [];
    const logger = createLogger({
      service: 'audit-test',
      destination: new Writable({
        write(chunk, _encoding, done) {
          text.push(String(chunk));
          done();
        },
      }),
    });
    const { identity } = parseConfigWithAuth(
      z.object({}),
      {
        CTXFLOW_API_KEYS_FILE: file,
        CTXFLOW_OIDC_ISSUER: issuer,
        CTXFLOW_OIDC_AUDIENCE: 'ctxflow',
        CTXFLOW_OIDC_JWKS_URL: issuer,
      },
      { parseApiKeys, isLoopback },
    );
    const auth = createIdentity(identity, { log: logger, audit: createAuditLog(logger) });
    const embedded = await buildEmbeddedApp({
      config: { apiKeys: new Map(), secrets: { generic: [{ tenant: 'acme', secret: 'feed-secret' }] } },
      logger,
      authenticate: auth.authenticate,
    });
    const call = async (method: 'GET' | 'POST' | 'DELETE', url: string, credential: string, payload?: object) => {
      const response = await embedded.app.inject({
        method,
        url,
        headers: { authorization: `Bearer ${credential}` },
        ...(payload ? { payload } : {}),
      });
      return { status: response.statusCode, body: response.body ? response.json() : undefined };
    };
    const { agentId } = (await call('POST', '/agents', KEY, { context: 'an agent' })).body;
    const { sessionId } = (await call('POST', '/sessions', token, { agentId })).body;
    const step = (await call('POST', `/sessions/${sessionId}/steps`, KEY, {})).body;
    const branch = (await call('POST', `/sessions/${sessionId}/branches`, KEY, { atStepId: step.stepId })).body;
    const subscription = { source: 'generic', ticket: 'T-1' };
    expect((await call('POST', `/sessions/${sessionId}/subscriptions`, KEY, subscription)).status).toBe(201);
    expect((await call('DELETE', `/sessions/${sessionId}/subscriptions`, token, subscription)).status).toBe(200);
    expect((await call('POST', '/sessions', READER, {})).status).toBe(403);
    expect((await call('DELETE', `/agents/${agentId}?cascade=true`, token)).status).toBe(403);
    expect((await call('POST', '/agents', 'a-wrong-key-0123456789', { context: 'x' })).status).toBe(401);
    expect((await call('DELETE', `/sessions/${branch.sessionId}`, KEY)).status).toBe(204);
    expect((await call('DELETE', `/agents/${agentId}?cascade=true`, KEY)).status).toBe(204);
    writeFileSync(file, `acme:${KEY}\n`);
    await vi.waitFor(() => expect(text.join('')).toContain('api-keys.reload'), { timeout: 5_000, interval: 100 });

    const keyId = `key:${sha256Hex(KEY).slice(0, 12)}`;
    const readerId = `key:${sha256Hex(READER).slice(0, 12)}`;
    const audit = text
      .flatMap((chunk) => chunk.trim().split('\n'))
      .map((line) => JSON.parse(line))
      .filter((line) => line.audit === true)
      .map(({ tenant, subject, action, target, outcome, msg }) => {
        expect(msg).toBe('audit');
        return { tenant, subject, action, target, outcome };
      });
    expect(audit).toEqual([
      { tenant: 'acme', subject: keyId, action: 'agent.create', target: agentId, outcome: 'ok' },
      { tenant: 'acme', subject: 'alice@example.com', action: 'session.create', target: sessionId, outcome: 'ok' },
      { tenant: 'acme', subject: keyId, action: 'session.branch', target: branch.sessionId, outcome: 'ok' },
      {
        tenant: 'acme',
        subject: keyId,
        action: 'subscription.create',
        target: `${sessionId} generic:T-1`,
        outcome: 'ok',
      },
      {
        tenant: 'acme',
        subject: 'alice@example.com',
        action: 'subscription.remove',
        target: `${sessionId} generic:T-1`,
        outcome: 'ok',
      },
      { tenant: 'acme', subject: readerId, action: 'session.create', target: '-', outcome: 'refused' },
      {
        tenant: 'acme',
        subject: 'alice@example.com',
        action: 'agent.erase-cascade',
        target: agentId,
        outcome: 'refused',
      },
      { tenant: '-', subject: '-', action: 'agent.create', target: '-', outcome: 'refused' },
      { tenant: 'acme', subject: keyId, action: 'session.erase', target: branch.sessionId, outcome: 'ok' },
      { tenant: 'acme', subject: keyId, action: 'agent.erase-cascade', target: agentId, outcome: 'ok' },
      { tenant: '*', subject: 'operator', action: 'api-keys.reload', target: file, outcome: 'ok' },
    ]);
    const log = text.join('');
    for (const secret of [KEY, READER, token, token.split('.')[2]!, 'feed-secret', sha256Hex(KEY)]) {
      expect(log).not.toContain(secret);
    }
    auth.close();
    await embedded.close();
  });
});
