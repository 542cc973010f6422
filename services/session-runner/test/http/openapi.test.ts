import { createMemoryBus } from '@ctxflow/bus';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { feedRoutes, MemoryDeliveryLedger } from '@ctxflow/feed-ingestor';
import { createAuthenticator } from '@ctxflow/service-kit';
import {
  buildRunnerApp,
  createEngine,
  inspectorRoutes,
  MemorySessionStore,
  OPERATIONS,
  openApiPath,
} from '@ctxflow/session-runner';
import { MemorySubscriptionStore, subscriptionRoutes } from '@ctxflow/step-context';
import { Validator } from '@seriousme/openapi-schema-validator';
import type { RouteOptions } from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';

/** `METHOD /openapi/{path}` of every route a fastify app registers (HEAD routes fastify adds to GETs aside). */
function collector() {
  const routes = new Set<string>();
  const onRoute = (route: RouteOptions) => {
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      routes.add(`${method} ${openApiPath(route.url)}`);
    }
  };
  return { routes, onRoute };
}

function documented(doc: { paths: Record<string, Record<string, unknown>> }): Set<string> {
  const out = new Set<string>();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of Object.keys(item)) out.add(`${method.toUpperCase()} ${path}`);
  }
  return out;
}

let embedded: EmbeddedApp | undefined;
afterAll(async () => embedded?.close());

describe('GET /openapi.json', () => {
  it('the embedded app documents every route it registers, without credentials, as valid OpenAPI 3.1', async () => {
    const { routes, onRoute } = collector();
    embedded = await buildEmbeddedApp({
      config: {
        apiKeys: new Map([['key-a', 'tenant-a']]),
        secrets: { generic: [{ tenant: 'tenant-a', secret: 'feed-secret' }] },
      },
      onRoute,
    });
    // With API keys set, the document still needs none (like /healthz).
    const answer = await embedded.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(answer.statusCode).toBe(200);
    expect(answer.headers['content-type']).toMatch(/^application\/json/);
    const doc = answer.json();
    expect(doc.openapi).toBe('3.1.0');

    expect(routes.size).toBeGreaterThan(30);
    const inDoc = documented(doc);
    expect([...routes].filter((r) => !inDoc.has(r))).toEqual([]);
    // Every documented operation is a route of the app (no stale entries).
    expect([...inDoc].filter((r) => !routes.has(r))).toEqual([]);

    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('the session-runner app (as its main builds it) documents every route it registers', async () => {
    const { routes, onRoute } = collector();
    const store = new MemorySessionStore();
    const subscriptions = new MemorySubscriptionStore();
    const app = buildRunnerApp({
      engine: createEngine({ store }),
      authenticate: createAuthenticator(new Map()),
      onRoute,
      protectedRoutes: [
        async (scope) => {
          await subscriptionRoutes(scope, { subscriptions, directory: { tenantOf: async () => undefined } });
        },
      ],
      openRoutes: [
        inspectorRoutes,
        async (scope) => {
          await scope.register(feedRoutes, {
            publisher: createMemoryBus().publisher,
            ledger: new MemoryDeliveryLedger(),
            secrets: { generic: 'feed-secret' },
          });
        },
      ],
    });
    await app.ready();
    const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const inDoc = documented(doc);
    expect([...routes].filter((r) => !inDoc.has(r))).toEqual([]);
    expect(inDoc.size).toBe(OPERATIONS.length);
    await app.close();
  });

  it('request bodies are the zod schemas the routes parse with', async () => {
    embedded ??= await buildEmbeddedApp({ config: { apiKeys: new Map(), secrets: {} } });
    const doc = (await embedded.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const agents = doc.paths['/agents'].post.requestBody.content['application/json'].schema;
    expect(agents.additionalProperties).toBe(false);
    expect(agents.properties.tools.items.properties.name.pattern).toBe('^[A-Za-z0-9_-]{1,64}$');
    expect(Object.keys(agents.properties.tools.items.properties)).toContain('parameters');
    const steps = doc.paths['/sessions/{sessionId}/steps'].post;
    expect(steps.requestBody.content['application/json'].schema.properties.format.enum).toEqual([
      'neutral',
      'openai-chat',
      'openai-responses',
      'anthropic',
    ]);
    expect(Object.keys(steps.responses)).toEqual(['200', '400', '401', '404', '409', '413', '500', '503']);
    expect(doc.paths['/healthz'].get.security).toEqual([]);
    expect(doc.paths['/context'].post.security).toBeUndefined();
  });
});
