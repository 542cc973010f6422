/**
 * A benchmark server process: the embedded app (`buildEmbeddedApp`) with one
 * extra route, `POST /bench/hello`, the baseline: a fastify route on the same
 * server that answers a constant whatever the body. Listens on 127.0.0.1:0.
 *
 * IPC protocol (parent -> child): `{ type: 'cpu' }` answers
 * `{ type: 'cpu', ms }` (this process's user + system CPU since start, in ms);
 * `{ type: 'stop' }` closes and exits. On start the child sends
 * `{ type: 'listening', port }`.
 *
 * Environment: BENCH_FEED_SECRET (the generic, incidentio and PagerDuty feeds' secret), BENCH_TELEMETRY=1
 * starts OpenTelemetry the way the embedded composition root does
 * (startTelemetry + createContextTelemetry), exporting to the OTLP endpoint in
 * the standard OTEL_* variables. BENCH_AUTH (JSON `{ apiKey, tenant, oidc }`) makes every route but
 * the baseline take that API key or a JWT verified against `oidc` (OidcOptions).
 */
import { buildEmbeddedApp } from '@ctxflow/embedded';
import { createAuthenticator, JwtVerifier, type OidcOptions } from '@ctxflow/service-kit';
import { createContextTelemetry } from '@ctxflow/session-runner';
import { type RunningTelemetry, startTelemetry } from '@ctxflow/telemetry';
import { cpuMs } from './cpu.ts';
import { BASELINE_PATH } from './http-server.ts';

const BASELINE_ANSWER = { recorded: 1 };

const secret = process.env.BENCH_FEED_SECRET;
if (!secret) throw new Error('BENCH_FEED_SECRET is not set');
let telemetry: RunningTelemetry | undefined;
if (process.env.BENCH_TELEMETRY === '1') telemetry = startTelemetry({ serviceName: 'ctxflow-bench' });

const auth = process.env.BENCH_AUTH
  ? (JSON.parse(process.env.BENCH_AUTH) as { apiKey: string; tenant: string; oidc: OidcOptions })
  : undefined;

const embedded = await buildEmbeddedApp({
  config: { apiKeys: new Map(), secrets: { generic: secret, incidentio: secret, pagerduty: secret } },
  ...(auth
    ? { authenticate: createAuthenticator(new Map([[auth.apiKey, auth.tenant]]), { jwt: new JwtVerifier(auth.oidc) }) }
    : {}),
  ...(telemetry
    ? { telemetry: createContextTelemetry(), metricsText: () => (telemetry as RunningTelemetry).metricsText() }
    : {}),
  openRoutes: [
    async (scope) => {
      scope.post(BASELINE_PATH, async () => BASELINE_ANSWER);
    },
  ],
});
await embedded.app.listen({ host: '127.0.0.1', port: 0 });
const address = embedded.app.server.address();
if (address === null || typeof address === 'string') throw new Error('no TCP address');

process.on('message', async (message: { type: string }) => {
  if (message.type === 'cpu') process.send?.({ type: 'cpu', ms: cpuMs() });
  if (message.type === 'stop') {
    await embedded.close();
    await telemetry?.shutdown();
    process.exit(0);
  }
});
process.send?.({ type: 'listening', port: address.port });
