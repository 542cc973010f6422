import { CtxflowError, feedSourceSchema, idSchema, validationRefusal } from '@ctxflow/contracts';
import { ERROR_ANSWERS, SCOPE, type ZodTypeProvider } from '@ctxflow/service-kit';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { SessionDirectory } from './session-directory.ts';
import { ANY_TICKET, type Subscription, type SubscriptionStore } from './subscription-store.ts';

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

const subscriptionFields = {
  source: feedSourceSchema,
  ticket: z.string().min(1).max(256),
  scope: z.string().min(1).max(256).optional(),
};

/** A subscription as answers carry it. */
const subscription = z.object(subscriptionFields).meta({ id: 'Subscription', title: 'Subscription' });

export const subscriptionBodySchema = z
  .strictObject(subscriptionFields)
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
  })
  .meta({ id: 'SubscriptionRequest', title: 'SubscriptionRequest' });

/** `DELETE` names the subscription in its body or in its query (`?source=&ticket=&scope=`). */
const subscriptionQuery = z.object({
  source: z.string().optional(),
  ticket: z.string().optional(),
  scope: z.string().optional(),
});

function parseSubscription(raw: unknown, where: string): Subscription {
  const parsed = subscriptionBodySchema.safeParse(raw);
  if (!parsed.success) throw validationRefusal(parsed.error, where);
  const { source, ticket, scope } = parsed.data;
  return scope === undefined ? { source, ticket } : { source, ticket, scope };
}

/** The audit line's target of a subscription change: the session, the source and the ticket or scope. */
function auditTarget(sessionId: string, subscription: Subscription): string {
  const scope = subscription.scope === undefined ? '' : ` scope ${subscription.scope}`;
  return `${sessionId} ${subscription.source}:${subscription.ticket}${scope}`;
}

const sessionParams = z.object({ sessionId: idSchema });
const tags = ['subscriptions'];
const notFound = ERROR_ANSWERS[404];

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
  const ownedSession = async (request: { params: { sessionId: string }; tenant: string }): Promise<string> => {
    const { sessionId } = request.params;
    const tenant = await deps.directory.tenantOf(sessionId);
    if (tenant === undefined || tenant !== request.tenant) {
      throw new CtxflowError('state_session_not_found', 'session not found');
    }
    return sessionId;
  };
  const api = app.withTypeProvider<ZodTypeProvider>();

  api.post(
    '/sessions/:sessionId/subscriptions',
    {
      config: { scope: SCOPE.write, audit: 'subscription.create' },
      schema: {
        tags,
        operationId: 'subscribe',
        summary: 'Subscribe a session to a ticket, or to every ticket of a scope',
        params: sessionParams,
        body: subscriptionBodySchema,
        response: {
          201: z
            .object({ sessionId: z.string(), subscription, created: z.boolean() })
            .meta({ id: 'SubscriptionCreated', title: 'SubscriptionCreated' }),
          404: notFound,
        },
      },
    },
    async (request, reply) => {
      const sessionId = await ownedSession(request);
      const subscription = parseSubscription(request.body, 'body');
      request.auditDetail = { target: auditTarget(sessionId, subscription) };
      const created = await deps.subscriptions.subscribe(request.tenant, sessionId, subscription);
      return reply.status(201).send({ sessionId, subscription, created });
    },
  );

  api.delete(
    '/sessions/:sessionId/subscriptions',
    {
      config: { scope: SCOPE.write, audit: 'subscription.remove' },
      schema: {
        tags,
        operationId: 'unsubscribe',
        summary: 'Unsubscribe (the subscription in the body or the query)',
        params: sessionParams,
        querystring: subscriptionQuery,
        body: subscriptionBodySchema.optional(),
        response: {
          200: z
            .object({ sessionId: z.string(), subscription, removed: z.boolean() })
            .meta({ id: 'SubscriptionRemoved', title: 'SubscriptionRemoved' }),
          404: notFound,
        },
      },
    },
    async (request, reply) => {
      const sessionId = await ownedSession(request);
      const subscription =
        request.body === undefined
          ? parseSubscription(request.query, 'querystring')
          : parseSubscription(request.body, 'body');
      request.auditDetail = { target: auditTarget(sessionId, subscription) };
      const removed = await deps.subscriptions.unsubscribe(request.tenant, sessionId, subscription);
      return reply.status(200).send({ sessionId, subscription, removed });
    },
  );

  api.get(
    '/sessions/:sessionId/subscriptions',
    {
      config: { scope: SCOPE.read },
      schema: {
        tags,
        operationId: 'listSubscriptions',
        summary: "A session's subscriptions",
        params: sessionParams,
        response: {
          200: z
            .object({ sessionId: z.string(), subscriptions: z.array(subscription) })
            .meta({ id: 'SubscriptionList', title: 'SubscriptionList' }),
          404: notFound,
        },
      },
    },
    async (request, reply) => {
      const sessionId = await ownedSession(request);
      return reply.status(200).send({ sessionId, subscriptions: await deps.subscriptions.list(sessionId) });
    },
  );
}
