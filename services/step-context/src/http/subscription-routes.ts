import { CtxflowError, feedSourceSchema } from '@ctxflow/contracts';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { SessionDirectory } from '../ports/session-directory.ts';
import { ANY_TICKET, type Subscription, type SubscriptionStore } from '../ports/subscription-store.ts';

export interface SubscriptionRoutesDeps {
  subscriptions: SubscriptionStore;
  directory: SessionDirectory;
}

/**
 * The wire shape of a subscription:
 * `{ "source": "github", "ticket": "octo/app#12" }`,
 * `{ "source": "github", "ticket": "*", "scope": "octo/app" }` (a whole repository),
 * `{ "source": "jira", "ticket": "*", "scope": "PROJ" }`, `{ "source": "zendesk", "ticket": "*", "scope": "<account id>" }`,
 * `{ "source": "generic", "ticket": "*" }` (every generic ticket),
 * `{ "source": "cloudevents", "ticket": "*", "scope": "<CloudEvents source>" }` (one ticket system),
 * `{ "source": "<configured source>", "ticket": "*" }`.
 * Sources are names (lowercase letters, digits, `-`): the built-in feeds and
 * any configured one; a name no feed publishes simply matches nothing.
 */
/** Sources whose unscoped wildcard would span a whole ticket system: refused without a scope. */
const SCOPED_SOURCES: ReadonlySet<string> = new Set(['github', 'jira', 'zendesk']);

export const subscriptionBodySchema = z
  .strictObject({
    source: feedSourceSchema,
    ticket: z.string().min(1).max(256),
    scope: z.string().min(1).max(256).optional(),
  })
  .superRefine((body, ctx) => {
    if (body.ticket !== ANY_TICKET && body.scope !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['scope'], message: `scope is only allowed with ticket "${ANY_TICKET}"` });
    }
    if (body.ticket === ANY_TICKET && body.scope === undefined && SCOPED_SOURCES.has(body.source)) {
      ctx.addIssue({
        code: 'custom',
        path: ['scope'],
        message: `ticket "${ANY_TICKET}" of ${body.source} needs a scope (a GitHub owner/repo, a Jira project key, a Zendesk account id)`,
      });
    }
  });

function parseSubscription(raw: unknown): Subscription {
  const parsed = subscriptionBodySchema.safeParse(raw ?? {});
  if (!parsed.success) {
    const message = parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ');
    throw new CtxflowError('validation_error', message);
  }
  const { source, ticket, scope } = parsed.data;
  return scope === undefined ? { source, ticket } : { source, ticket, scope };
}

/**
 * `POST|DELETE|GET /sessions/:sessionId/subscriptions`. Expects `request.tenant`
 * set by the caller's auth hook (service-kit tenantHook) in an enclosing scope:
 * a session that does not exist, or belongs to another tenant, is 404
 * `state_session_not_found`. A subscription is the tenant's: it matches only
 * ticket updates whose feed secret named that tenant.
 *
 * - POST `{ source, ticket, scope? }` -> 201 `{ sessionId, subscription, created }`
 *   (`created` false when it already existed; nothing changes).
 * - DELETE with the same fields in the body or the query -> 200 `{ sessionId, subscription, removed }`.
 * - GET -> 200 `{ sessionId, subscriptions }`, sorted by source, ticket, scope.
 */
export async function subscriptionRoutes(app: FastifyInstance, deps: SubscriptionRoutesDeps): Promise<void> {
  const ownedSession = async (request: FastifyRequest): Promise<string> => {
    const { sessionId } = request.params as { sessionId: string };
    const tenant = await deps.directory.tenantOf(sessionId);
    if (tenant === undefined || tenant !== request.tenant) {
      throw new CtxflowError('state_session_not_found', `session ${sessionId} not found`);
    }
    return sessionId;
  };

  app.post('/sessions/:sessionId/subscriptions', async (request, reply) => {
    const sessionId = await ownedSession(request);
    const subscription = parseSubscription(request.body);
    const created = await deps.subscriptions.subscribe(request.tenant, sessionId, subscription);
    return reply.status(201).send({ sessionId, subscription, created });
  });

  app.delete('/sessions/:sessionId/subscriptions', async (request, reply) => {
    const sessionId = await ownedSession(request);
    const hasBody = request.body !== undefined && request.body !== null && request.body !== '';
    const subscription = parseSubscription(hasBody ? request.body : request.query);
    const removed = await deps.subscriptions.unsubscribe(request.tenant, sessionId, subscription);
    return reply.status(200).send({ sessionId, subscription, removed });
  });

  app.get('/sessions/:sessionId/subscriptions', async (request, reply) => {
    const sessionId = await ownedSession(request);
    return reply.status(200).send({ sessionId, subscriptions: await deps.subscriptions.list(sessionId) });
  });
}
