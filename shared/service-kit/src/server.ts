import { MAX_ID_LENGTH } from '@ctxflow/contracts';
import Fastify, { type FastifyInstance, type FastifyServerOptions, type RouteOptions } from 'fastify';
import { serializerCompiler } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { type ApiInfo, registerApiDocument, validatorCompiler } from './api-document.ts';
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
  installErrorHandler(app);
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
