import { idSchema } from '@ctxflow/contracts';
import { ERROR_ANSWERS, SCOPE, type ZodTypeProvider } from '@ctxflow/service-kit';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ContextEngine } from '../domain/context-engine.ts';
import { usageBody, usageRecorded } from './usage-schemas.ts';

export interface UsageRoutesDeps {
  engine: ContextEngine;
}

const stepParams = z.object({ sessionId: idSchema, stepId: idSchema });
const { 404: notFound } = ERROR_ANSWERS;

/**
 * `POST /sessions/:sessionId/steps/:stepId/usage`: the provider's usage of the step's model
 * request, as the SDK returned it (usage-schemas.ts). Register inside a scope that sets
 * `request.tenant` (as the session routes).
 */
export async function usageRoutes(app: FastifyInstance, deps: UsageRoutesDeps): Promise<void> {
  const { engine } = deps;
  const api = app.withTypeProvider<ZodTypeProvider>();
  api.post(
    '/sessions/:sessionId/steps/:stepId/usage',
    {
      config: { scope: SCOPE.write },
      schema: {
        tags: ['steps'],
        operationId: 'reportUsage',
        summary: "The provider's usage of a step's model request (first report wins)",
        description:
          "Kept beside what the step's unchanged prefix predicted cached; a step whose provider cached less is flagged (`shortfall`). A repeat answers the first report.",
        params: stepParams,
        body: usageBody,
        response: { 200: usageRecorded, 404: notFound },
      },
    },
    async (request) => {
      const { sessionId, stepId } = request.params;
      return engine.reportUsage(request.tenant, sessionId, stepId, request.body);
    },
  );
}
