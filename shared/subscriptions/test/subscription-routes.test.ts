import { createAuthenticator, createServer, tenantHook } from '@ctxflow/service-kit';
import { MemorySubscriptionStore, type SessionDirectory, subscriptionRoutes } from '@ctxflow/subscriptions';
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const owners = new Map([
  ['s-acme', 'acme'],
  ['s-globex', 'globex'],
]);
const directory: SessionDirectory = { tenantOf: async (id) => owners.get(id) };
const keys = new Map([
  ['key-acme', 'acme'],
  ['key-globex', 'globex'],
]);

describe('subscription routes', () => {
  let app: FastifyInstance;
  let subscriptions: MemorySubscriptionStore;

  beforeEach(async () => {
    subscriptions = new MemorySubscriptionStore();
    app = createServer();
    await app.register(async (scope) => {
      scope.addHook('onRequest', tenantHook(createAuthenticator(keys)));
      await scope.register(subscriptionRoutes, { subscriptions, directory });
    });
    await app.ready();
  });
  afterEach(async () => {
    await app.close();
  });

  const call = async (method: 'GET' | 'POST' | 'DELETE', url: string, body?: object, key = 'key-acme') => {
    const response = await app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${key}` },
      ...(body === undefined ? {} : { payload: body }),
    });
    return { status: response.statusCode, body: response.json() };
  };

  it('POST subscribes (201, idempotent), GET lists, DELETE by body or query removes', async () => {
    expect(await call('POST', '/sessions/s-acme/subscriptions', { source: 'github', ticket: 'octo/app#12' })).toEqual({
      status: 201,
      body: { sessionId: 's-acme', subscription: { source: 'github', ticket: 'octo/app#12' }, created: true },
    });
    expect(
      (await call('POST', '/sessions/s-acme/subscriptions', { source: 'github', ticket: 'octo/app#12' })).body,
    ).toEqual({ sessionId: 's-acme', subscription: { source: 'github', ticket: 'octo/app#12' }, created: false });
    expect(
      (await call('POST', '/sessions/s-acme/subscriptions', { source: 'jira', ticket: '*', scope: 'PROJ' })).status,
    ).toBe(201);
    expect(await call('GET', '/sessions/s-acme/subscriptions')).toEqual({
      status: 200,
      body: {
        sessionId: 's-acme',
        subscriptions: [
          { source: 'github', ticket: 'octo/app#12' },
          { source: 'jira', ticket: '*', scope: 'PROJ' },
        ],
      },
    });
    // The subscription is acme's: it matches acme's updates only.
    const update = { source: 'jira' as const, ticket: 'PROJ-9', scope: 'PROJ' };
    expect(await subscriptions.sessionsFor({ ...update, tenant: 'acme' })).toEqual(['s-acme']);
    expect(await subscriptions.sessionsFor({ ...update, tenant: 'globex' })).toEqual([]);
    expect(await call('DELETE', '/sessions/s-acme/subscriptions', { source: 'github', ticket: 'octo/app#12' })).toEqual(
      {
        status: 200,
        body: { sessionId: 's-acme', subscription: { source: 'github', ticket: 'octo/app#12' }, removed: true },
      },
    );
    expect(await call('DELETE', '/sessions/s-acme/subscriptions?source=jira&ticket=*&scope=PROJ')).toEqual({
      status: 200,
      body: { sessionId: 's-acme', subscription: { source: 'jira', ticket: '*', scope: 'PROJ' }, removed: true },
    });
    expect((await call('DELETE', '/sessions/s-acme/subscriptions?source=jira&ticket=*&scope=PROJ')).body.removed).toBe(
      false,
    );
    expect((await call('GET', '/sessions/s-acme/subscriptions')).body.subscriptions).toEqual([]);
  });

  it('an unknown session or one of another tenant is 404 state_session_not_found, nothing written', async () => {
    const notFound = {
      status: 404,
      body: { error: { code: 'state_session_not_found', message: 'session not found', retryable: false } },
    };
    expect(await call('POST', '/sessions/s-globex/subscriptions', { source: 'generic', ticket: 'T' })).toEqual(
      notFound,
    );
    expect(await call('GET', '/sessions/s-globex/subscriptions')).toEqual(notFound);
    expect(await call('DELETE', '/sessions/s-globex/subscriptions?source=generic&ticket=T')).toEqual(notFound);
    expect((await call('POST', '/sessions/nope/subscriptions', { source: 'generic', ticket: 'T' })).status).toBe(404);
    expect(await subscriptions.list('s-globex')).toEqual([]);
    expect((await call('GET', '/sessions/s-globex/subscriptions', undefined, 'key-globex')).status).toBe(200);
    expect((await call('GET', '/sessions/s-acme/subscriptions', undefined, 'wrong')).body.error.code).toBe(
      'unauthorized',
    );
  });

  it('a bad body is 400 validation_error naming the problem', async () => {
    const bad = async (body: object) => (await call('POST', '/sessions/s-acme/subscriptions', body)).body.error;
    // Sources are configured names now: a name that breaks the name rule is refused.
    expect(await bad({ source: 'Git_Lab', ticket: 'x' })).toMatchObject({ code: 'validation_error', retryable: false });
    expect((await bad({ source: 'a'.repeat(33), ticket: 'x' })).message).toMatch(
      /^source: expected a feed source name/,
    );
    expect((await bad({ source: 'github', ticket: '*' })).message).toBe(
      'scope: ticket "*" of github needs a scope (a GitHub owner/repo, a Jira project key, a Zendesk account id)',
    );
    expect((await bad({ source: 'github', ticket: 'octo/app#1', scope: 'octo/app' })).message).toBe(
      'scope: scope is only allowed with ticket "*"',
    );
    expect((await bad({ source: 'generic', ticket: '' })).message).toMatch(/^ticket: /);
    // The unknown property is counted, its name (the caller's text) never echoed.
    expect((await bad({ source: 'generic', ticket: 'T', extra: 1 })).message).toBe(
      'body: 1 unknown property (this object takes only the properties it declares)',
    );
    expect(await subscriptions.list('s-acme')).toEqual([]);
  });

  it('configured sources: any source name subscribes; its unscoped wildcard is allowed, as for cloudevents', async () => {
    for (const body of [
      { source: 'my-tracker', ticket: 'T-1' },
      { source: 'my-tracker', ticket: '*' },
      { source: 'cloudevents', ticket: '*', scope: 'https://jira.example.com' },
    ]) {
      expect((await call('POST', '/sessions/s-acme/subscriptions', body)).status).toBe(201);
    }
    expect(await subscriptions.list('s-acme')).toHaveLength(3);
  });
});
