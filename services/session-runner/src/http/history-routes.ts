/** A session's history: rewinds and branches. */
import { SCOPE } from '@ctxflow/service-kit';
import { rewindResult, sessionCreated } from './answers.ts';
import { notFound, type RouteApi, type RouteContext, sessionParams } from './route-kit.ts';
import { branchBody, rewindBody } from './schemas.ts';

export function historyRoutes(api: RouteApi, { engine, withinQuota }: RouteContext): void {
  const sessions = { tags: ['sessions'] };
  api.post(
    '/sessions/:sessionId/rewind',
    {
      config: { scope: SCOPE.write },
      schema: {
        ...sessions,
        operationId: 'rewindSession',
        summary: 'Truncate the log to a step',
        params: sessionParams,
        body: rewindBody,
        response: { 200: rewindResult, 404: notFound },
      },
    },
    async (request) => engine.rewind(request.tenant, request.params.sessionId, request.body),
  );

  api.post(
    '/sessions/:sessionId/branches',
    {
      config: { scope: SCOPE.write, audit: 'session.branch' },
      schema: {
        ...sessions,
        operationId: 'branchSession',
        summary: 'Branch a session',
        params: sessionParams,
        body: branchBody,
        response: { 201: sessionCreated, 404: notFound },
      },
    },
    async (request, reply) => {
      await withinQuota(request.tenant);
      const meta = await engine.branch(request.tenant, request.params.sessionId, request.body);
      request.auditDetail = { target: meta.sessionId };
      return reply.status(201).send({ sessionId: meta.sessionId });
    },
  );
}
