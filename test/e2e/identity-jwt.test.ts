/**
 * Bearer JWTs (`CTXFLOW_OIDC_*`) verified with jose against a local issuer: its discovery
 * document and JWKS served over HTTP here, tokens signed by the test with jose's SignJWT.
 * Each refusal is 401 `unauthorized` naming the check (never the token) or 403 `forbidden`
 * for a missing scope, and writes nothing.
 */
import { createSecretKey } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { createIdentity, JWKS_COOLDOWN_MS, JWT_CACHE_TTL_MS } from '@ctxflow/service-kit';
import { buildRunnerApp, createEngine, loadRunnerConfig, MemorySessionStore } from '@ctxflow/session-runner';
import type { FastifyInstance } from 'fastify';
import { exportJWK, exportSPKI, generateKeyPair, type JWK, type JWTPayload, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const AUDIENCE = 'ctxflow-api';
const API_KEY = 'api-key-beside-tokens-0123456789';

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;
let server: Server;
let issuer: string;
let jwks: { keys: JWK[] } = { keys: [] };
let jwksFetches = 0;
const keys: Record<string, { pair: KeyPair; alg: string }> = {};

async function key(kid: string, alg: string) {
  const pair = await generateKeyPair(alg, { extractable: true });
  keys[kid] = { pair, alg };
  return { ...(await exportJWK(pair.publicKey)), kid, alg, use: 'sig' } as JWK;
}

beforeAll(async () => {
  server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://x').pathname;
    if (path === '/realms/ctxflow/.well-known/openid-configuration') {
      response.setHeader('content-type', 'application/json');
      response.end(JSON.stringify({ issuer, jwks_uri: `${issuer}/protocol/openid-connect/certs` }));
    } else if (path === '/realms/ctxflow/protocol/openid-connect/certs') {
      jwksFetches++;
      response.setHeader('content-type', 'application/json');
      response.end(JSON.stringify(jwks));
    } else {
      response.statusCode = 404;
      response.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(server.address() as { port: number }).port}/realms/ctxflow`;
  jwks = {
    keys: [await key('rs', 'RS256'), await key('ps', 'PS256'), await key('es', 'ES256'), await key('ed', 'EdDSA')],
  };
  // Signs tokens, but is not in the JWKS until the issuer rotates.
  await key('rotated', 'ES256');
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const now = () => Math.floor(Date.now() / 1000);

function sign(
  claims: JWTPayload,
  options: { kid?: string; exp?: number; nbf?: number; iss?: string; aud?: string } = {},
) {
  const kid = options.kid ?? 'rs';
  const { pair, alg } = keys[kid]!;
  const jwt = new SignJWT({ tenant: 'acme', scope: 'ctxflow:read ctxflow:write', ...claims })
    .setProtectedHeader({ alg, kid, typ: 'JWT' })
    .setSubject('user-1')
    .setIssuer(options.iss ?? issuer)
    .setAudience(options.aud ?? AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(options.exp ?? now() + 300);
  if (options.nbf !== undefined) jwt.setNotBefore(options.nbf);
  return jwt.sign(pair.privateKey);
}

async function runner(env: Record<string, string> = {}, cooldownMs?: number) {
  const config = loadRunnerConfig({
    CTXFLOW_OIDC_ISSUER: issuer,
    CTXFLOW_OIDC_AUDIENCE: AUDIENCE,
    CTXFLOW_API_KEYS: `keytenant:${API_KEY}`,
    ...env,
  });
  const identity = createIdentity(config.identity, cooldownMs === undefined ? {} : { jwksCooldownMs: cooldownMs });
  const app = buildRunnerApp({
    engine: createEngine({ store: new MemorySessionStore() }),
    authenticate: identity.authenticate,
  });
  await app.ready();
  return app;
}

async function createSession(app: FastifyInstance, token: string) {
  const response = await app.inject({
    method: 'POST',
    url: '/sessions',
    headers: { authorization: `Bearer ${token}` },
    payload: {},
  });
  return { status: response.statusCode, body: response.json() };
}

async function sessionsOf(app: FastifyInstance, token: string): Promise<number> {
  const response = await app.inject({ method: 'GET', url: '/sessions', headers: { authorization: `Bearer ${token}` } });
  expect(response.statusCode).toBe(200);
  return response.json().sessions.length;
}

const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

describe('JWT bearer tokens (CTXFLOW_OIDC_ISSUER)', () => {
  it('a valid token of each asymmetric algorithm is its tenant; discovery finds the JWKS; API keys still work', async () => {
    const app = await runner();
    for (const kid of ['rs', 'ps', 'es', 'ed']) {
      expect((await createSession(app, await sign({}, { kid }))).status, kid).toBe(201);
    }
    expect(await sessionsOf(app, await sign({ scope: 'ctxflow:read' }))).toBe(4);
    expect(await sessionsOf(app, await sign({ tenant: 'globex' }))).toBe(0);
    expect(await sessionsOf(app, API_KEY)).toBe(0);
    // Within the 60 s leeway: expired 30 s ago, valid from 30 s on.
    expect((await createSession(app, await sign({}, { exp: now() - 30 }))).status).toBe(201);
    expect((await createSession(app, await sign({}, { nbf: now() + 30 }))).status).toBe(201);
    await app.close();
  });

  it('each failed check is 401 naming the check, never the token, and writes nothing', async () => {
    const app = await runner();
    const valid = await sign({});
    const header = { alg: 'RS256', kid: 'rs', typ: 'JWT' };
    const claims = { tenant: 'acme', scope: 'ctxflow:write', sub: 'x', iss: issuer, aud: AUDIENCE, exp: now() + 300 };
    const publicPem = await exportSPKI(keys.rs!.pair.publicKey);
    const cases: [string, string][] = [
      ['expired', await sign({}, { exp: now() - 120 })],
      ['not yet valid', await sign({}, { nbf: now() + 120 })],
      ['wrong issuer', await sign({}, { iss: 'https://other.example.com/' })],
      ['wrong audience', await sign({}, { aud: 'another-api' })],
      ['alg none', `${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`],
      [
        'HS256 with the public key',
        await new SignJWT(claims)
          .setProtectedHeader({ alg: 'HS256', kid: 'rs', typ: 'JWT' })
          .sign(createSecretKey(Buffer.from(publicPem))),
      ],
      ['bad signature', `${valid.split('.').slice(0, 2).join('.')}.${(await sign({ tenant: 'b' })).split('.')[2]}`],
      ['missing tenant claim', await sign({ tenant: undefined })],
      ['tampered payload', `${b64(header)}.${b64({ ...claims, tenant: 'globex' })}.${valid.split('.')[2]}`],
    ];
    const answers: Record<string, string> = {};
    for (const [name, token] of cases) {
      const { status, body } = await createSession(app, token);
      expect(status, name).toBe(401);
      expect(body.error.code, name).toBe('unauthorized');
      expect(body.error.retryable, name).toBe(false);
      expect(body.error.message, name).not.toContain(token.split('.')[1]);
      answers[name] = body.error.message;
    }
    expect(answers).toEqual({
      expired: 'token refused: expired (exp)',
      'not yet valid': 'token refused: not yet valid (nbf)',
      'wrong issuer': 'token refused: wrong issuer (iss)',
      'wrong audience': 'token refused: wrong audience (aud)',
      'alg none': 'token refused: algorithm not allowed (only RS256, PS256, ES256, EdDSA)',
      'HS256 with the public key': 'token refused: algorithm not allowed (only RS256, PS256, ES256, EdDSA)',
      'bad signature': 'token refused: bad signature',
      'missing tenant claim': 'token refused: no tenant claim (tenant)',
      'tampered payload': 'token refused: bad signature',
    });
    expect(await sessionsOf(app, valid)).toBe(0);
    expect(await sessionsOf(app, await sign({ tenant: 'globex' }))).toBe(0);
    await app.close();
  });

  it('a missing scope is 403 forbidden and writes nothing; scp as a list or a string carries scopes too', async () => {
    const app = await runner();
    const reader = await sign({ scope: 'ctxflow:read openid profile' });
    expect(await createSession(app, reader)).toEqual({
      status: 403,
      body: { error: { code: 'forbidden', message: 'this request needs the ctxflow:write scope', retryable: false } },
    });
    expect((await createSession(app, await sign({ scope: undefined }))).status).toBe(403);
    expect(await sessionsOf(app, reader)).toBe(0);
    expect((await createSession(app, await sign({ scope: undefined, scp: ['ctxflow:write'] }))).status).toBe(201);
    expect((await createSession(app, await sign({ scope: undefined, scp: 'ctxflow:write' }))).status).toBe(201);
    expect(await sessionsOf(app, reader)).toBe(2);
    await app.close();
  });

  it('an unknown kid refreshes the JWKS once, then 401; once the issuer rotates, its tokens are accepted', async () => {
    jwks = { keys: jwks.keys.filter((k) => k.kid !== 'rotated') };
    const app = await runner({}, 0);
    expect((await createSession(app, await sign({}))).status).toBe(201);
    const before = jwksFetches;
    const unknown = await createSession(app, await sign({}, { kid: 'rotated' }));
    expect(unknown).toEqual({
      status: 401,
      body: {
        error: {
          code: 'unauthorized',
          message: "token refused: no signing key of the issuer matches the token's kid",
          retryable: false,
        },
      },
    });
    expect(jwksFetches - before).toBe(1);
    jwks = {
      keys: [...jwks.keys, { ...(await exportJWK(keys.rotated!.pair.publicKey)), kid: 'rotated', alg: 'ES256' }],
    };
    expect((await createSession(app, await sign({}, { kid: 'rotated' }))).status).toBe(201);
    expect(jwksFetches - before).toBe(2);
    expect(await sessionsOf(app, await sign({}))).toBe(2);
    await app.close();
  });

  it(`unknown kids fetch the JWKS at most once per ${JWKS_COOLDOWN_MS} ms by default`, async () => {
    jwks = { keys: jwks.keys.filter((k) => k.kid !== 'rotated') };
    const app = await runner();
    expect((await createSession(app, await sign({}))).status).toBe(201);
    const before = jwksFetches;
    for (let i = 0; i < 5; i++) {
      expect((await createSession(app, await sign({}, { kid: 'rotated' }))).status).toBe(401);
    }
    expect(jwksFetches - before).toBe(0);
    await app.close();
  });

  it('a token that passed is answered from memory, never past the leeway, each token its own caller', async () => {
    const app = await runner({}, 0);
    const acme = await sign({}, { kid: 'es' });
    const globex = await sign({ tenant: 'globex' }, { kid: 'es' });
    expect((await createSession(app, acme)).status).toBe(201);
    expect((await createSession(app, globex)).status).toBe(201);
    expect((await createSession(app, acme)).status).toBe(201);
    expect(await sessionsOf(app, acme)).toBe(2);
    expect(await sessionsOf(app, globex)).toBe(1);

    // The issuer withdraws the key (an unknown kid makes the runner fetch the JWKS again): a new
    // token signed with it is refused; one that passed before is answered from memory, at most
    // JWT_CACHE_TTL_MS.
    const withdrawn = jwks.keys;
    jwks = { keys: withdrawn.filter((k) => k.kid !== 'es' && k.kid !== 'rotated') };
    expect((await createSession(app, await sign({}, { kid: 'rotated' }))).status).toBe(401);
    expect((await createSession(app, await sign({ sub: 'new' }, { kid: 'es' }))).body.error.message).toBe(
      "token refused: no signing key of the issuer matches the token's kid",
    );
    expect(await sessionsOf(app, acme)).toBe(2);
    expect(JWT_CACHE_TTL_MS).toBe(60_000);
    jwks = { keys: withdrawn };

    // Expired 59 s ago: inside the 60 s leeway now, refused once it is past, cached or not.
    const ending = await sign({}, { exp: now() - 59 });
    expect((await createSession(app, ending)).status).toBe(201);
    let answer = await createSession(app, ending);
    for (let i = 0; i < 40 && answer.status === 201; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      answer = await createSession(app, ending);
    }
    expect(answer).toEqual({
      status: 401,
      body: { error: { code: 'unauthorized', message: 'token refused: expired (exp)', retryable: false } },
    });
    await app.close();
  });

  it('CTXFLOW_OIDC_TENANT_CLAIM and CTXFLOW_OIDC_JWKS_URL are honoured', async () => {
    const app = await runner({
      CTXFLOW_OIDC_TENANT_CLAIM: 'org_id',
      CTXFLOW_OIDC_JWKS_URL: `${issuer}/protocol/openid-connect/certs`,
    });
    expect((await createSession(app, await sign({ tenant: undefined, org_id: 'acme' }))).status).toBe(201);
    expect((await createSession(app, await sign({}))).body.error.message).toBe(
      'token refused: no tenant claim (org_id)',
    );
    await app.close();
  });

  it('an issuer whose discovery fails is 503 store_unavailable (retryable), never 401', async () => {
    const app = await runner({ CTXFLOW_OIDC_ISSUER: `${issuer}-elsewhere` });
    const { status, body } = await createSession(app, await sign({}, { iss: `${issuer}-elsewhere` }));
    expect({ status, body }).toEqual({
      status: 503,
      body: {
        error: {
          code: 'store_unavailable',
          message: "the issuer's signing keys could not be fetched; retry",
          retryable: true,
        },
      },
    });
    await app.close();
  });

  it('the configuration is checked: an audience is required with the issuer, URLs must be URLs', () => {
    expect(() => loadRunnerConfig({ CTXFLOW_OIDC_ISSUER: issuer })).toThrow(
      "CTXFLOW_OIDC_AUDIENCE: required with CTXFLOW_OIDC_ISSUER (the tokens' aud)",
    );
    expect(() =>
      loadRunnerConfig({ CTXFLOW_OIDC_ISSUER: 'not a url', CTXFLOW_OIDC_AUDIENCE: 'a', CTXFLOW_OIDC_JWKS_URL: 'x' }),
    ).toThrow(/CTXFLOW_OIDC_ISSUER: expected an http\(s\) URL[\s\S]*CTXFLOW_OIDC_JWKS_URL: expected an http\(s\) URL/);
    expect(() => loadRunnerConfig({ CTXFLOW_OIDC_AUDIENCE: 'a' })).toThrow(
      'CTXFLOW_OIDC_AUDIENCE: set without CTXFLOW_OIDC_ISSUER, which turns JWTs on',
    );
    expect(
      loadRunnerConfig({ CTXFLOW_OIDC_ISSUER: issuer, CTXFLOW_OIDC_AUDIENCE: 'a', CTXFLOW_HOST: '0.0.0.0' }).host,
    ).toBe('0.0.0.0');
  });
});
