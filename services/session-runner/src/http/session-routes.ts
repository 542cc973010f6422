import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ContextEngine } from '../domain/context-engine.ts';
import type { AgentRecord } from '../domain/model.ts';
import {
  answerBody,
  approvalBody,
  branchBody,
  callContextBody,
  createAgentBody,
  createSessionBody,
  memoryBody,
  messageBody,
  parseBody,
  patchAgentBody,
  patchSessionBody,
  postContextBody,
  restartBody,
  rewindBody,
  stepBody,
  toolCallBody,
} from './schemas.ts';

export interface SessionRoutesDeps {
  engine: ContextEngine;
}

type SessionParams = { Params: { sessionId: string } };
type CallParams = { Params: { sessionId: string; callId: string } };

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

/** Writes one server-sent event. */
function sse(reply: FastifyReply, event: string, data: unknown) {
  reply.raw.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
}

/**
 * The session-runner's HTTP contract and its tool-side routes (README.md "HTTP API").
 * Register inside a scope that sets `request.tenant`.
 */
export async function sessionRoutes(app: FastifyInstance, deps: SessionRoutesDeps) {
  const { engine } = deps;

  app.post('/agents', async (request, reply) => {
    const body = parseBody(createAgentBody, request.body);
    const agent = await engine.createAgent(request.tenant, body);
    return reply.status(201).send({ agentId: agent.agentId });
  });

  app.get<{ Params: { agentId: string } }>('/agents/:agentId', async (request) =>
    publicAgent(await engine.getAgent(request.tenant, request.params.agentId)),
  );

  app.patch<{ Params: { agentId: string } }>('/agents/:agentId', async (request) => {
    const body = parseBody(patchAgentBody, request.body);
    const agent = await engine.updateAgent(request.tenant, request.params.agentId, body);
    return { agentId: agent.agentId, version: agent.version, appliesFrom: 'next_run' };
  });

  app.post<{ Params: { agentId: string } }>('/agents/:agentId/memories', async (request, reply) => {
    const body = parseBody(memoryBody, request.body);
    await engine.remember(request.tenant, request.params.agentId, body.content);
    return reply.status(201).send({ remembered: true });
  });

  app.post('/sessions', async (request, reply) => {
    const body = parseBody(createSessionBody, request.body);
    const meta = await engine.createSession(request.tenant, body);
    return reply.status(201).send({ sessionId: meta.sessionId });
  });

  app.get('/sessions', async (request) => ({
    sessions: (await engine.listSessions(request.tenant)).map((m) => ({
      sessionId: m.sessionId,
      agentId: m.agentId ?? null,
      createdAt: m.createdAt,
      steps: m.steps,
      branchOf: m.branchOf ?? null,
    })),
  }));

  app.get<SessionParams>('/sessions/:sessionId', async (request) =>
    engine.snapshot(request.tenant, request.params.sessionId),
  );

  app.get<SessionParams>('/sessions/:sessionId/inspect', async (request) =>
    engine.inspect(request.tenant, request.params.sessionId),
  );

  app.patch<SessionParams>('/sessions/:sessionId', async (request) => {
    const body = parseBody(patchSessionBody, request.body);
    return engine.updateSession(request.tenant, request.params.sessionId, body);
  });

  app.post('/context', async (request) => engine.addContext(request.tenant, parseBody(postContextBody, request.body)));

  app.post<SessionParams>('/sessions/:sessionId/steps', async (request) => {
    const body = parseBody(stepBody, request.body);
    return engine.step(request.tenant, request.params.sessionId, body);
  });

  app.post<SessionParams>('/sessions/:sessionId/runs/restart', async (request) => {
    const body = parseBody(restartBody, request.body);
    return engine.restartRun(request.tenant, request.params.sessionId, body);
  });

  app.post<SessionParams>('/sessions/:sessionId/messages', async (request, reply) => {
    const body = parseBody(messageBody, request.body);
    const entry = await engine.appendMessage(request.tenant, request.params.sessionId, body);
    return reply.status(201).send({ seq: entry.seq });
  });

  app.get<SessionParams>('/sessions/:sessionId/messages', async (request) => ({
    messages: await engine.listMessages(request.tenant, request.params.sessionId),
  }));

  app.post<SessionParams>('/sessions/:sessionId/tool-calls', async (request) => {
    const body = parseBody(toolCallBody, request.body);
    return engine.gateToolCall(request.tenant, request.params.sessionId, body);
  });

  app.post<CallParams>('/sessions/:sessionId/tool-calls/:callId/context', async (request) => {
    const body = parseBody(callContextBody, request.body);
    return engine.addCallContext(request.tenant, request.params.sessionId, { ...body, callId: request.params.callId });
  });

  app.post<CallParams>('/sessions/:sessionId/tool-calls/:callId/approval', async (request) => {
    const body = parseBody(approvalBody, request.body);
    return engine.answerApproval(request.tenant, request.params.sessionId, request.params.callId, body.approved);
  });

  app.post<CallParams>('/sessions/:sessionId/tool-calls/:callId/answer', async (request) => {
    const body = parseBody(answerBody, request.body);
    return engine.answerClientCall(request.tenant, request.params.sessionId, request.params.callId, body.content);
  });

  app.post<SessionParams>('/sessions/:sessionId/rewind', async (request) => {
    const body = parseBody(rewindBody, request.body);
    return engine.rewind(request.tenant, request.params.sessionId, body);
  });

  app.post<SessionParams>('/sessions/:sessionId/branches', async (request, reply) => {
    const body = parseBody(branchBody, request.body);
    const meta = await engine.branch(request.tenant, request.params.sessionId, body);
    return reply.status(201).send({ sessionId: meta.sessionId });
  });

  /**
   * Server-sent events: `message`, `step`, `rewind` and `context_skipped`
   * chunks, never a context row (R4, R26). `?follow=false` replays the recent
   * chunks and ends.
   */
  app.get<SessionParams & { Querystring: { follow?: string } }>(
    '/sessions/:sessionId/stream',
    async (request: FastifyRequest<SessionParams & { Querystring: { follow?: string } }>, reply) => {
      await engine.snapshot(request.tenant, request.params.sessionId);
      reply.hijack();
      reply.raw.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
      });
      for (const chunk of engine.recentChunks(request.params.sessionId)) sse(reply, chunk.type, chunk);
      if (request.query.follow === 'false') {
        reply.raw.end();
        return;
      }
      const stop = engine.subscribe(request.params.sessionId, (chunk) => sse(reply, chunk.type, chunk));
      request.raw.on('close', stop);
    },
  );
}
