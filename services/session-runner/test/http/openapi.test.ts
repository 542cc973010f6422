import { createMemoryBus } from '@ctxflow/bus';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { feedRoutes, MemoryDeliveryLedger } from '@ctxflow/feeds';
import { createAuthenticator } from '@ctxflow/service-kit';
import { buildRunnerApp, createEngine, inspectorRoutes, MemorySessionStore } from '@ctxflow/session-runner';
import { MemorySubscriptionStore, subscriptionRoutes } from '@ctxflow/subscriptions';
import { Validator } from '@seriousme/openapi-schema-validator';
import type { RouteOptions } from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';

/** A fastify path as an OpenAPI path: `:param` -> `{param}`. */
const openApiPath = (path: string) => path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

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
    expect([...inDoc].filter((r) => !routes.has(r))).toEqual([]);
    await app.close();
  });

  it('request bodies are the zod schemas the routes parse with', async () => {
    const doc = await embeddedDocument();
    const schemas = doc.components.schemas;
    expect(doc.paths['/agents'].post.requestBody.content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/CreateAgentRequest',
    });
    const agents = schemas.CreateAgentRequest;
    expect(agents.additionalProperties).toBe(false);
    expect(schemas.ToolDeclaration.properties.name.pattern).toBe('^[A-Za-z0-9_-]{1,64}$');
    expect(Object.keys(schemas.ToolDeclaration.properties)).toContain('parameters');
    expect(schemas.StepRequest.properties.format.enum).toEqual([
      'neutral',
      'openai-chat',
      'openai-responses',
      'anthropic',
    ]);
    const steps = doc.paths['/sessions/{sessionId}/steps'].post;
    expect(steps.requestBody.required).toBe(false);
    expect(doc.paths['/agents'].post.requestBody.required).toBe(true);
    expect(Object.keys(steps.responses)).toEqual([
      '200',
      '400',
      '401',
      '403',
      '404',
      '408',
      '409',
      '413',
      '415',
      '429',
      '431',
      '500',
      '503',
    ]);
    expect(doc.paths['/healthz'].get.security).toEqual([]);
    expect(doc.paths['/context'].post.security).toEqual([{ bearer: ['ctxflow:write'] }]);
  });

  it('every secured operation names the one scope it needs, and documents 401, 403 and 429', async () => {
    const doc = await embeddedDocument();
    const scopes: Record<string, string[]> = {};
    for (const item of Object.values(doc.paths) as Record<string, any>[]) {
      for (const operation of Object.values(item)) {
        if (operation.security?.length === 0) continue;
        expect(operation.security, operation.operationId).toHaveLength(1);
        scopes[operation.operationId] = operation.security[0].bearer;
        expect(Object.keys(operation.responses), operation.operationId).toEqual(
          expect.arrayContaining(['401', '403', '429']),
        );
      }
    }
    const reads = Object.keys(scopes).filter((id) => scopes[id]![0] === 'ctxflow:read');
    expect(reads.sort()).toEqual([
      'getAgent',
      'getDelivery',
      'getSession',
      'inspectSession',
      'listMessages',
      'listSessions',
      'listSubscriptions',
      'streamSession',
    ]);
    expect(Object.values(scopes).every((s) => s.length === 1 && /^ctxflow:(read|write)$/.test(s[0]!))).toBe(true);
    expect(Object.keys(scopes)).toHaveLength(28);
    expect(doc.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.paths['/agents/{agentId}'].delete.description).toContain('ctxflow:admin');
    expect(doc.paths['/agents/{agentId}'].get.responses['403'].description).toContain('`forbidden`');
  });

  it('answers are named components a generator can read', async () => {
    const doc = await embeddedDocument();
    const schemas = doc.components.schemas;
    for (const [name, schema] of Object.entries(schemas) as [string, { title?: string }][]) {
      expect(schema.title, name).toBe(name);
    }
    // Every body and answer of an operation is a component (no inline names like S0___schema0).
    for (const [path, item] of Object.entries(doc.paths) as [string, Record<string, Operation>][]) {
      for (const [method, op] of Object.entries(item)) {
        const media = [
          ...Object.values(op.requestBody?.content ?? {}),
          ...Object.values(op.responses).flatMap((r) => Object.values(r.content ?? {})),
        ].filter((m) => !('type' in m.schema) && Object.keys(m.schema).length > 0 && !m.schema.description);
        for (const m of media) expect(m.schema.$ref, `${method} ${path}`).toMatch(/^#\/components\/schemas\/[A-Z]/);
      }
    }
    expect(schemas.StepAnswer.discriminator.propertyName).toBe('format');
    expect(Object.keys(schemas.StepAnswer.discriminator.mapping)).toEqual([
      'neutral',
      'openai-chat',
      'openai-responses',
      'anthropic',
    ]);
    expect(schemas.ToolDecision.properties.execute).toEqual({ type: 'boolean' });
    expect(schemas.ToolDecision.properties.reason.enum).toContain('tool_inactive');
    expect(schemas.MessagesAppended.required ?? []).toEqual([]);
    expect(schemas.Cursor).toEqual({ title: 'Cursor', description: expect.any(String) });
    expect(schemas.ListedMessage.properties.seq.format).toBe('int64');
    // Every integer has a width: int32 when its bounds fit, else int64.
    expect(schemas.CreateAgentRequest.properties.cacheTtlMs.format).toBe('int32');
    expect(schemas.StepRequest.properties.since.format).toBe('int64');
    const unsized: string[] = [];
    const visit = (node: unknown, path: string): void => {
      if (typeof node !== 'object' || node === null) return;
      const schema = node as Record<string, unknown>;
      if (schema.type === 'integer' && schema.format === undefined) unsized.push(path);
      for (const [key, value] of Object.entries(schema)) visit(value, `${path}/${key}`);
    };
    visit(doc, '#');
    expect(unsized).toEqual([]);
    // Any configured source, in requests and answers alike.
    expect(schemas.Subscription.properties.source.enum).toBeUndefined();
    expect(schemas.Subscription.properties.source.pattern).toBe(schemas.SubscriptionRequest.properties.source.pattern);
    // Each error answer lists the codes it can carry.
    expect(schemas.ConflictErrorBody.properties.code.enum).toEqual([
      'state_context_key_conflict',
      'state_agent_in_use',
      'state_conflict',
      'state_calls_pending',
    ]);
    expect(doc.paths['/sessions/{sessionId}'].get.responses['404'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/NotFoundError',
    });
  });
});

interface Operation {
  requestBody?: { content?: Record<string, { schema: Record<string, string> }> };
  responses: Record<string, { content?: Record<string, { schema: Record<string, string> }> }>;
}

async function embeddedDocument() {
  embedded ??= await buildEmbeddedApp({ config: { apiKeys: new Map(), secrets: {} } });
  return (await embedded.app.inject({ method: 'GET', url: '/openapi.json' })).json();
}
