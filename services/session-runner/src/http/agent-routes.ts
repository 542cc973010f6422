/** The agent routes: create, read, change, erase an agent, and its memories. */
import { requireScope, SCOPE } from '@ctxflow/service-kit';
import { z } from 'zod';
import type { AgentRecord } from '../domain/model.ts';
import { agent, agentCreated, agentUpdated, memoryAdded } from './answers.ts';
import { agentParams, conflict, contextBody, notFound, type RouteApi, type RouteContext } from './route-kit.ts';
import { createAgentBody, deleteAgentQuery, memoryBody, patchAgentBody } from './schemas.ts';

function publicAgent(agent: AgentRecord) {
  return {
    agentId: agent.agentId,
    context: agent.context,
    model: agent.model ?? null,
    tools: agent.tools,
    stepContext: agent.stepContext,
    memory: agent.memory,
    cacheTtlMs: agent.cacheTtlMs,
    version: agent.version,
  };
}

export function agentRoutes(api: RouteApi, { engine }: RouteContext): void {
  const agents = { tags: ['agents'] };
  api.post(
    '/agents',
    {
      config: { scope: SCOPE.write, audit: 'agent.create' },
      schema: {
        ...agents,
        operationId: 'createAgent',
        summary: 'Create an agent',
        body: createAgentBody,
        response: { 201: agentCreated },
      },
    },
    async (request, reply) => {
      const created = await engine.createAgent(request.tenant, request.body);
      request.auditDetail = { target: created.agentId };
      return reply.status(201).send({ agentId: created.agentId });
    },
  );

  api.get(
    '/agents/:agentId',
    {
      config: { scope: SCOPE.read },
      schema: {
        ...agents,
        operationId: 'getAgent',
        summary: 'Read an agent',
        params: agentParams,
        response: { 200: agent, 404: notFound },
      },
    },
    async (request) => publicAgent(await engine.getAgent(request.tenant, request.params.agentId)),
  );

  api.patch(
    '/agents/:agentId',
    {
      config: { scope: SCOPE.write },
      ...contextBody,
      schema: {
        ...agents,
        operationId: 'updateAgent',
        summary: 'Change the agent context or model (from the next run)',
        params: agentParams,
        body: patchAgentBody,
        response: { 200: agentUpdated, 404: notFound },
      },
    },
    async (request) => {
      const updated = await engine.updateAgent(request.tenant, request.params.agentId, request.body);
      return { agentId: updated.agentId, version: updated.version, appliesFrom: 'next_run' as const };
    },
  );

  /**
   * Erases the agent and its memories: 204, also when there is nothing (again) or the
   * agent is another tenant's (left alone: nothing tells the cases apart). 409
   * `state_agent_in_use` while it has sessions, unless `?cascade=true` erases them too.
   */
  api.delete(
    '/agents/:agentId',
    {
      config: { scope: SCOPE.write, audit: 'agent.erase' },
      schema: {
        ...agents,
        operationId: 'deleteAgent',
        summary: 'Erase an agent and its memories (idempotent); with cascade=true its sessions too',
        description: 'With `cascade=true` the caller needs `ctxflow:admin` besides `ctxflow:write` (else 403).',
        params: agentParams,
        querystring: deleteAgentQuery,
        response: { 204: z.null().describe('Erased, or there was nothing to erase'), 409: conflict },
      },
    },
    async (request, reply) => {
      const cascade = request.query.cascade === 'true';
      // Erasing the agent's sessions with it is an administrator's action.
      if (cascade) {
        request.auditDetail = { action: 'agent.erase-cascade' };
        requireScope(request, SCOPE.admin);
      }
      await engine.deleteAgent(request.tenant, request.params.agentId, { cascade });
      return reply.status(204).send(null);
    },
  );

  api.post(
    '/agents/:agentId/memories',
    {
      config: { scope: SCOPE.write },
      schema: {
        ...agents,
        operationId: 'addMemory',
        summary: 'Remember a memory',
        params: agentParams,
        body: memoryBody,
        response: { 201: memoryAdded, 404: notFound },
      },
    },
    async (request, reply) => {
      await engine.remember(request.tenant, request.params.agentId, request.body.content);
      return reply.status(201).send({ remembered: true });
    },
  );
}
