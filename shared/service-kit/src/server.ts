import type { IncomingMessage } from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import { MAX_ID_LENGTH } from '@ctxflow/contracts';
import { type Attributes, type Histogram, metrics } from '@opentelemetry/api';
import Fastify, { type FastifyInstance, type FastifyServerOptions, type RouteOptions } from 'fastify';
import { serializerCompiler } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { type ApiInfo, registerApiDocument, validatorCompiler } from './api-document.ts';
import type { Identity } from './auth.ts';
import { clientErrorHandler, frameworkErrors, installErrorHandler } from './error-handler.ts';

export interface ServerOptions {
  /** Fastify's logger option (a pino instance or options); false in tests. */
  logger?: FastifyServerOptions['loggerInstance'] | false;
  /** Prometheus exposition text for `GET /metrics`. */
  metricsText?: () => Promise<string>;
  /** Readiness checks for `GET /readyz`: name -> a probe that throws when not ready. */
  readiness?: Record<string, () => Promise<void>>;
  bodyLimit?: number;
  /** Called with every route the server registers, its own included (the OpenAPI test lists them). */
  onRoute?: (route: RouteOptions) => void;
  /** The title, version and description of the server's OpenAPI document. */
  api?: ApiInfo;
}

/** How much of a request body still arriving after its answer is read (and dropped) before the connection closes. */
export const UNREAD_BODY_MAX_BYTES = 16 * 1024 * 1024;
/** How long a request body still arriving after its answer is read before the connection closes, in ms. */
export const UNREAD_BODY_MAX_MS = 5_000;

/** Whether the request has a body that has not arrived completely (`complete` is Node's, absent on injected requests). */
function bodyStillArriving(raw: IncomingMessage): boolean {
  const { headers } = raw;
  const hasBody = headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0;
  return hasBody && raw.complete === false;
}

/**
 * The answer as a stream that ends once the rest of the request body has arrived, at most
 * UNREAD_BODY_MAX_BYTES or UNREAD_BODY_MAX_MS later. The answer goes out at once; the
 * response ends (and, with `connection: close`, the connection closes) only after the
 * upload, so the client is not reset while it still writes and reads its answer.
 */
function endAfterUpload(raw: IncomingMessage, answer: string | Buffer): Readable {
  const out = new PassThrough();
  out.write(answer);
  let dropped = 0;
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    raw.off('data', onData);
    raw.off('end', finish);
    raw.off('close', finish);
    if (!out.destroyed) out.end();
  };
  const onData = (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > UNREAD_BODY_MAX_BYTES) finish();
  };
  const timer = setTimeout(finish, UNREAD_BODY_MAX_MS);
  raw.on('data', onData);
  raw.once('end', finish);
  raw.once('close', finish);
  // The upload ends in an error when the connection closes before it arrived (`aborted`): expected here.
  raw.on('error', finish);
  // The response was cut off (the client left): nothing more to wait for.
  out.once('close', finish);
  raw.resume();
  return out;
}

/** The meter scope of ctxflow's own instruments (INSTRUMENTATION_SCOPE of @ctxflow/telemetry). */
const METER_SCOPE = 'ctxflow';
/** OpenTelemetry's HTTP server metric (semantic conventions): duration of each answered request, in seconds. */
export const METRIC_HTTP_SERVER_DURATION = 'http.server.request.duration';
/** The bucket boundaries the semantic conventions advise for it, in seconds. */
const HTTP_DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];

/**
 * Records every answer in `http.server.request.duration` on the global meter provider
 * (startTelemetry's), by method, route template (absent for an unknown route) and status code.
 * The histogram is made at the first answer: the provider is registered by then.
 *
 * Recorded here because neither instrumentation records it as the services run: @fastify/otel
 * makes spans only (it holds no meter; it hands the route template to the HTTP instrumentation),
 * and @opentelemetry/instrumentation-http records the metric only when it patched `node:http`
 * before the server loaded it (a `--import` hook in every process) and makes a span of every
 * request, including probes and scrapes.
 */
function recordRequestDurations(app: FastifyInstance): void {
  let duration: Histogram | undefined;
  app.addHook('onResponse', async (request, reply) => {
    duration ??= metrics.getMeter(METER_SCOPE).createHistogram(METRIC_HTTP_SERVER_DURATION, {
      description: 'Duration of HTTP server requests',
      unit: 's',
      advice: { explicitBucketBoundaries: HTTP_DURATION_BUCKETS },
    });
    const attributes: Attributes = {
      'http.request.method': request.method,
      'http.response.status_code': reply.statusCode,
    };
    const route = request.routeOptions.url;
    if (route) attributes['http.route'] = route;
    duration.record(reply.elapsedTime / 1000, attributes);
  });
}

const DEFAULT_API: ApiInfo = {
  title: 'ctxflow',
  version: '3.0.0',
  description: 'Ticket updates into running AI-agent sessions as context rows, exactly once, prompt cache intact.',
};

const readiness = z
  .object({
    status: z.enum(['ready', 'not_ready']),
    checks: z.record(z.string(), z.string()).describe('Each check by name: `ok`, or why it is not ready'),
  })
  .meta({ id: 'Readiness', title: 'Readiness' });

/**
 * A fastify instance with the shared error format and the operational routes
 * (`/healthz`, `/readyz`, `/metrics`, never behind credentials). It never
 * listens: tests call `app.inject()`.
 *
 * Every answer the server itself produces is in the error form: the router's
 * refusals (a bad %-escape, a path parameter over MAX_ID_LENGTH) go through
 * `frameworkErrors`, an unknown route through the not-found handler, and what
 * Node's HTTP parser refuses before fastify sees a request (headers over the
 * size limit, a malformed request, a request that did not arrive in time)
 * through `clientErrorHandler`.
 *
 * Routes declare their params, query, body and answers as zod schemas (fastify's zod type
 * provider): requests are validated by them, answers serialized by them (nothing undeclared
 * leaves the server), and `GET /openapi.json` is generated from them.
 *
 * A JSON request with an empty body is a request without a body (`request.body` is
 * undefined): what curl scripts, axios and generated clients send with
 * `content-type: application/json` on a DELETE or a body-less POST. Fastify's own JSON
 * parser reads every other body (its prototype-poisoning protection included).
 *
 * An answer sent before the request body arrived completely (413 `payload_too_large`, a
 * refusal before the body was read) carries `connection: close`, and the connection
 * closes only once the rest of the body has been read and dropped (bounded by
 * UNREAD_BODY_MAX_BYTES and UNREAD_BODY_MAX_MS): closing while the client still writes
 * would reset the connection, and the client would see EPIPE or ECONNRESET, not its answer.
 */
export function createServer(options: ServerOptions = {}): FastifyInstance {
  const app = Fastify({
    ...(options.logger ? { loggerInstance: options.logger } : { logger: false }),
    bodyLimit: options.bodyLimit ?? 4 * 1024 * 1024,
    // A path parameter is an id: the same limit as in a body (find-my-way measures it decoded).
    routerOptions: { maxParamLength: MAX_ID_LENGTH },
    frameworkErrors,
    clientErrorHandler,
  }) as unknown as FastifyInstance;
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerApiDocument(app, options.api ?? DEFAULT_API);
  if (options.onRoute) app.addHook('onRoute', options.onRoute);
  app.decorateRequest('tenant', '');
  app.decorateRequest('identity', null as unknown as Identity);
  app.decorateRequest('auditDetail', null);
  installErrorHandler(app);
  recordRequestDurations(app);

  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') done(null, undefined);
    else parseJson(request, body as string, done);
  });

  app.addHook('onSend', async (request, reply, payload) => {
    if (!bodyStillArriving(request.raw) || (typeof payload !== 'string' && !Buffer.isBuffer(payload))) return payload;
    reply.header('connection', 'close');
    reply.header('content-length', Buffer.byteLength(payload));
    return endAfterUpload(request.raw, payload);
  });

  app.register(async (scope) => operationalRoutes(scope, options));
  return app;
}

const operations = { tags: ['operations'] };

async function operationalRoutes(app: FastifyInstance, options: ServerOptions): Promise<void> {
  app.get(
    '/healthz',
    {
      schema: {
        ...operations,
        operationId: 'getHealth',
        summary: 'Liveness',
        response: { 200: z.object({ status: z.literal('ok') }).meta({ id: 'Health', title: 'Health' }) },
      },
    },
    async () => ({ status: 'ok' as const }),
  );

  const readyzSchema = {
    ...operations,
    operationId: 'getReadiness',
    summary: 'Readiness: 503 while a check fails',
    response: { 200: readiness, 503: readiness },
  };
  app.get('/readyz', { schema: readyzSchema }, async (_request, reply) => {
    const checks: Record<string, string> = {};
    let ready = true;
    for (const [name, probe] of Object.entries(options.readiness ?? {})) {
      try {
        await probe();
        checks[name] = 'ok';
      } catch (err) {
        ready = false;
        checks[name] = err instanceof Error ? err.message : 'not ready';
      }
    }
    return reply.status(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', checks });
  });

  const metricsSchema = {
    ...operations,
    operationId: 'getMetrics',
    summary: 'Prometheus metrics (text exposition format)',
    produces: ['text/plain'],
    response: { 200: z.string().describe('Prometheus text exposition format 0.0.4') },
  };
  app.get('/metrics', { schema: metricsSchema }, async (_request, reply) => {
    const text = options.metricsText ? await options.metricsText() : '';
    return reply.type('text/plain; version=0.0.4; charset=utf-8').serializer(String).send(text);
  });
}
