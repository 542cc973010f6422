import { MAX_ID_LENGTH } from '@ctxflow/contracts';
import Fastify, { type FastifyInstance, type FastifyServerOptions, type RouteOptions } from 'fastify';
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
}

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
 * A JSON request with an empty body is a request without a body (`request.body` is
 * undefined): what curl scripts, axios and generated clients send with
 * `content-type: application/json` on a DELETE or a body-less POST. Fastify's own JSON
 * parser reads every other body (its prototype-poisoning protection included).
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
  if (options.onRoute) app.addHook('onRoute', options.onRoute);
  app.decorateRequest('tenant', '');
  installErrorHandler(app);

  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') done(null, undefined);
    else parseJson(request, body as string, done);
  });

  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
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

  app.get('/metrics', async (_request, reply) => {
    const text = options.metricsText ? await options.metricsText() : '';
    return reply.type('text/plain; version=0.0.4; charset=utf-8').send(text);
  });

  return app;
}
