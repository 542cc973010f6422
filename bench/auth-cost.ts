/**
 * S3-jwt: what a bearer JWT costs `POST /context` beside an API key. Two benchmark servers
 * (the embedded app, lib/http-server-child.ts) take an API key or a JWT verified with jose
 * against a JWKS served here (RS256, as Keycloak, Entra ID and Auth0 sign by default):
 * one answers a token that passed from memory (JwtVerifier's default), the other checks the
 * signature and claims on every request (`cacheMaxTokens: 0`). Each route runs as S3a does
 * (10 connections, a new key per request, round-robin slices); the ratios are req/s with a
 * token over req/s with an API key on the same server, and the cost of one verification is
 * the difference in server CPU per request.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { type ServerProcess, startServerProcess } from './lib/http-server.ts';
import { combine, type LoadResult, runLoad } from './lib/load.ts';
import { progress } from './lib/progress.ts';
import { meets, type ScenarioResult } from './lib/report.ts';
import { median, round, summarize } from './lib/stats.ts';

export interface AuthCostOptions {
  trials: number;
  slices: number;
  sliceSeconds: number;
  warmupSeconds: number;
  connections: number;
  sessionsPerRun: number;
}

const API_KEY = 'bench-api-key-0123456789abcdef';
const TENANT = 'bench';
const AUDIENCE = 'ctxflow-api';
const NOTICE = 'Ticket PROJ-4312 moved to In Progress by alice@example.com (priority P2).';

interface Route {
  name: string;
  server: ServerProcess;
  bearer: string;
}

async function createSessions(route: Route, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const response = await fetch(`${route.server.url}/sessions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${route.bearer}`, 'content-type': 'application/json' },
      body: '{}',
    });
    if (response.status !== 201) throw new Error(`S3-jwt: POST /sessions ${response.status} ${await response.text()}`);
    ids.push(((await response.json()) as { sessionId: string }).sessionId);
  }
  return ids;
}

export async function runAuthCost(options: AuthCostOptions): Promise<ScenarioResult[]> {
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'bench', alg: 'RS256', use: 'sig' };
  const jwks = createServer((_request, response) =>
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })),
  );
  jwks.listen(0, '127.0.0.1');
  await once(jwks, 'listening');
  const issuer = 'https://idp.example.com/realms/ctxflow';
  const oidc = {
    issuer,
    audience: AUDIENCE,
    jwksUrl: `http://127.0.0.1:${(jwks.address() as { port: number }).port}/certs`,
  };
  const token = await new SignJWT({ tenant: TENANT, scope: 'ctxflow:read ctxflow:write' })
    .setProtectedHeader({ alg: 'RS256', kid: 'bench', typ: 'JWT' })
    .setSubject('bench-runtime')
    .setIssuer(issuer)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime('2h')
    .sign(privateKey);
  const server = (cacheMaxTokens?: number) =>
    startServerProcess({
      BENCH_FEED_SECRET: 'bench-feed-secret',
      BENCH_AUTH: JSON.stringify({
        apiKey: API_KEY,
        tenant: TENANT,
        oidc: cacheMaxTokens === undefined ? oidc : { ...oidc, cacheMaxTokens },
      }),
    });
  const [cached, checked] = await Promise.all([server(), server(0)]);
  try {
    const routes: Route[] = [
      { name: 'API key', server: cached, bearer: API_KEY },
      { name: 'JWT, from memory after the first', server: cached, bearer: token },
      { name: 'API key (every-request server)', server: checked, bearer: API_KEY },
      { name: 'JWT, verified on every request', server: checked, bearer: token },
    ];
    const source = async (route: Route) => {
      const sessions = await createSessions(route, options.sessionsPerRun);
      const headers = { authorization: `Bearer ${route.bearer}`, 'content-type': 'application/json' };
      let n = 0;
      return () => {
        const sessionId = sessions[n % sessions.length]!;
        n += 1;
        const items = [{ kind: 'notice', content: NOTICE }];
        return { path: '/context', headers, body: JSON.stringify({ sessionId, items, key: `k-${n}-${sessionId}` }) };
      };
    };
    const runOnce = async (route: Route, next: Awaited<ReturnType<typeof source>>, seconds: number) => {
      const result = await runLoad(route.server, next, { seconds, connections: options.connections });
      if (result.failed > 0) throw new Error(`S3-jwt ${route.name}: ${result.failed} failed requests`);
      return result;
    };

    progress(`S3-jwt: warm-up ${options.warmupSeconds}s per route`);
    for (const route of routes) await runOnce(route, await source(route), options.warmupSeconds);
    const results = new Map<string, LoadResult[]>(routes.map((r) => [r.name, []]));
    for (let trial = 0; trial < options.trials; trial++) {
      const sources = new Map(await Promise.all(routes.map(async (r) => [r.name, await source(r)] as const)));
      const runs = new Map<string, LoadResult[]>(routes.map((r) => [r.name, []]));
      for (let slice = 0; slice < options.slices; slice++) {
        const shift = trial * options.slices + slice;
        for (const route of routes.map((_, i) => routes[(i + shift) % routes.length]!)) {
          runs.get(route.name)!.push(await runOnce(route, sources.get(route.name)!, options.sliceSeconds));
        }
      }
      for (const route of routes) results.get(route.name)!.push(combine(runs.get(route.name)!));
      progress(
        `S3-jwt trial ${trial + 1}/${options.trials}: ${routes
          .map((r) => `${r.name} ${Math.round(results.get(r.name)!.at(-1)!.rps)} req/s`)
          .join(', ')}`,
      );
    }

    const of = (name: string) => results.get(name)!;
    const med = (name: string, pick: (r: LoadResult) => number) => median(of(name).map(pick));
    /** Extra server CPU per request of `a` over `b`, in µs (medians over trials). */
    const extraMicros = (a: string, b: string) =>
      round(med(a, (r) => r.serverCpuPer1k) - med(b, (r) => r.serverCpuPer1k), 0);
    const setup = `${options.connections} connections, no pipelining, ${options.trials} trials x ${options.slices} slices x ${options.sliceSeconds}s per route, routes round-robin`;
    const row = (id: string, title: string, a: string, b: string, goal: ScenarioResult['goal']): ScenarioResult => {
      const ratio = summarize(of(a).map((r, i) => r.rps / of(b)[i]!.rps));
      return {
        id,
        title,
        ratioOf: 'req/s with the JWT over req/s with an API key, same server',
        goal,
        ratio,
        met: meets(goal, ratio.median),
        cpuMsPer1k: {
          'JWT server': round(
            med(a, (r) => r.serverCpuPer1k),
            1,
          ),
          'JWT client': round(
            med(a, (r) => r.clientCpuPer1k),
            1,
          ),
          'API key server': round(
            med(b, (r) => r.serverCpuPer1k),
            1,
          ),
          'API key client': round(
            med(b, (r) => r.clientCpuPer1k),
            1,
          ),
        },
        figures: {
          'JWT req/s': Math.round(med(a, (r) => r.rps)),
          'API key req/s': Math.round(med(b, (r) => r.rps)),
          'server CPU per request over the API key (µs)': extraMicros(a, b),
          // Less sensitive to other load on the machine: the ratio if the server's CPU were the only limit.
          'server CPU ratio': round(med(b, (r) => r.serverCpuPer1k) / med(a, (r) => r.serverCpuPer1k), 2),
        },
        notes: [setup, 'RS256 token (2048-bit key), one token for the whole run, a new idempotency key per request'],
      };
    };
    return [
      row(
        'S3-jwt',
        'POST /context with a JWT (a verified token answered from memory)',
        'JWT, from memory after the first',
        'API key',
        { op: '>=', value: 0.9 },
      ),
      row(
        'S3-jwt-verify',
        'POST /context with a JWT verified on every request',
        'JWT, verified on every request',
        'API key (every-request server)',
        { op: '>=', value: 0.5 },
      ),
    ];
  } finally {
    await Promise.all([cached.stop(), checked.stop()]);
    jwks.close();
  }
}
