/** The session routes: create, list, read, erase, inspect a session, and its thread context. */
import { SCOPE } from '@ctxflow/service-kit';
import { z } from 'zod';
import { sessionCreated, sessionInspection, sessionList, sessionSnapshot, sessionUpdated } from './answers.ts';
import { contextBody, notFound, type RouteApi, type RouteContext, sessionParams } from './route-kit.ts';
import { createSessionBody, patchSessionBody } from './schemas.ts';

export function sessionRecordRoutes(api: RouteApi, { engine, withinQuota }: RouteContext): void {
  const sessions = { tags: ['sessions'] };
  api.post(
    '/sessions',
    {
      config: { scope: SCOPE.write, audit: 'session.create' },
      ...contextBody,
      schema: {
        ...sessions,
        operationId: 'createSession',
        summary: 'Create a session',
        body: createSessionBody,
        response: { 201: sessionCreated, 404: notFound },
      },
    },
    async (request, reply) => {
      await withinQuota(request.tenant);
      const meta = await engine.createSession(request.tenant, request.body);
      request.auditDetail = { target: meta.sessionId };
      return reply.status(201).send({ sessionId: meta.sessionId });
    },
  );

  api.get(
    '/sessions',
    {
      config: { scope: SCOPE.read },
      schema: {
        ...sessions,
        operationId: 'listSessions',
        summary: "The tenant's sessions",
        response: { 200: sessionList },
      },
    },
    async (request) => ({
      sessions: (await engine.listSessions(request.tenant)).map((m) => ({
        sessionId: m.sessionId,
        agentId: m.agentId ?? null,
        createdAt: m.createdAt,
        steps: m.steps,
        branchOf: m.branchOf ?? null,
      })),
    }),
  );

  api.get(
    '/sessions/:sessionId',
    {
      config: { scope: SCOPE.read },
      schema: {
        ...sessions,
        operationId: 'getSession',
        summary: 'A snapshot a user may see (no context row)',
        params: sessionParams,
        response: { 200: sessionSnapshot, 404: notFound },
      },
    },
    async (request) => engine.snapshot(request.tenant, request.params.sessionId),
  );

  /**
   * Erases the session in every store (log, queue, steps, calls, dedupe ids, feed streams,
   * cursor, marks, subscriptions): 204, also when there is nothing (again) or the session
   * is another tenant's (left alone: nothing tells the cases apart). Branches stay.
   */
  api.delete(
    '/sessions/:sessionId',
    {
      config: { scope: SCOPE.write, audit: 'session.erase' },
      schema: {
        ...sessions,
        operationId: 'deleteSession',
        summary: 'Erase a session in every store (idempotent)',
        params: sessionParams,
        response: { 204: z.null().describe('Erased, or there was nothing to erase') },
      },
    },
    async (request, reply) => {
      await engine.deleteSession(request.tenant, request.params.sessionId);
      return reply.status(204).send(null);
    },
  );

  api.get(
    '/sessions/:sessionId/inspect',
    {
      config: { scope: SCOPE.read },
      schema: {
        ...sessions,
        operationId: 'inspectSession',
        summary: "The operator's view, rows included",
        params: sessionParams,
        response: { 200: sessionInspection, 404: notFound },
      },
    },
    async (request) => engine.inspect(request.tenant, request.params.sessionId),
  );

  api.patch(
    '/sessions/:sessionId',
    {
      config: { scope: SCOPE.write },
      ...contextBody,
      schema: {
        ...sessions,
        operationId: 'updateSession',
        summary: 'Thread context (staged until the next rebuild) or forceRefresh',
        params: sessionParams,
        body: patchSessionBody,
        response: { 200: sessionUpdated, 404: notFound },
      },
    },
    async (request) => engine.updateSession(request.tenant, request.params.sessionId, request.body),
  );
}
