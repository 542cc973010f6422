import { MAX_CONTEXT_BODY_BYTES } from '@ctxflow/contracts';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ContextEngine, NeutralStepResult } from '../domain/context-engine.ts';
import type { AgentRecord } from '../domain/model.ts';
import { type ProviderFormat, toProviderRequest } from '../domain/provider-formats/index.ts';
import {
  answerBody,
  approvalBody,
  branchBody,
  callContextBody,
  createAgentBody,
  createSessionBody,
  deleteAgentQuery,
  memoryBody,
  parseBody,
  parseMessageBody,
  patchAgentBody,
  patchSessionBody,
  postContextBody,
  restartBody,
  rewindBody,
  stepBody,
  toolCallBody,
} from './schemas.ts';
import { boundedReplay, StreamFollowers } from './stream-followers.ts';

export interface SessionRoutesDeps {
  engine: ContextEngine;
  /** The server's stream followers (their limits; ended at close). Default: one per registration, default limits. */
  streams?: StreamFollowers;
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

/**
 * A neutral step answer with its `request` in a provider's format: that API's body without
 * `model` (and `max_tokens`). Rows, cursor and cache hints are the neutral answer's.
 */
function inProviderFormat(format: ProviderFormat, answer: NeutralStepResult) {
  return { ...answer, request: toProviderRequest(format, answer.request, answer.cache) };
}

/**
 * The session-runner's HTTP contract and its tool-side routes (README.md "HTTP API").
 * Register inside a scope that sets `request.tenant`.
 */
export async function sessionRoutes(app: FastifyInstance, deps: SessionRoutesDeps) {
  const { engine } = deps;
  const streams = deps.streams ?? new StreamFollowers(undefined, app.log);
  // Before the server stops listening: open streams end (a `shutdown` event, then the response ends),
  // so closing waits for no follower.
  app.addHook('preClose', async () => streams.endAll());

  app.post('/agents', async (request, reply) => {
    const body = parseBody(createAgentBody, request.body);
    const agent = await engine.createAgent(request.tenant, body);
    return reply.status(201).send({ agentId: agent.agentId });
  });

  app.get<{ Params: { agentId: string } }>('/agents/:agentId', async (request) =>
    publicAgent(await engine.getAgent(request.tenant, request.params.agentId)),
  );

  // Routes whose body is context blocks: a body far past the context limit is refused before it is
  // parsed, so no request holds the event loop parsing megabytes it would refuse anyway (D2).
  const contextBody = { bodyLimit: MAX_CONTEXT_BODY_BYTES };

  app.patch<{ Params: { agentId: string } }>('/agents/:agentId', contextBody, async (request) => {
    const body = parseBody(patchAgentBody, request.body);
    const agent = await engine.updateAgent(request.tenant, request.params.agentId, body);
    return { agentId: agent.agentId, version: agent.version, appliesFrom: 'next_run' };
  });

  /**
   * Erases the agent and its memories: 204, also when there is nothing (again) or the
   * agent is another tenant's (left alone: nothing tells the cases apart). 409
   * `state_agent_in_use` while it has sessions, unless `?cascade=true` erases them too.
   */
  app.delete<{ Params: { agentId: string }; Querystring: { cascade?: string } }>(
    '/agents/:agentId',
    async (request, reply) => {
      const cascade = parseBody(deleteAgentQuery, request.query ?? {}).cascade === 'true';
      await engine.deleteAgent(request.tenant, request.params.agentId, { cascade });
      return reply.status(204).send();
    },
  );

  app.post<{ Params: { agentId: string } }>('/agents/:agentId/memories', async (request, reply) => {
    const body = parseBody(memoryBody, request.body);
    await engine.remember(request.tenant, request.params.agentId, body.content);
    return reply.status(201).send({ remembered: true });
  });

  app.post('/sessions', contextBody, async (request, reply) => {
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

  /**
   * Erases the session in every store (log, queue, steps, calls, dedupe ids, feed batches,
   * cursor, marks, subscriptions): 204, also when there is nothing (again) or the session
   * is another tenant's (left alone: nothing tells the cases apart). Branches stay.
   */
  app.delete<SessionParams>('/sessions/:sessionId', async (request, reply) => {
    await engine.deleteSession(request.tenant, request.params.sessionId);
    return reply.status(204).send();
  });

  app.get<SessionParams>('/sessions/:sessionId/inspect', async (request) =>
    engine.inspect(request.tenant, request.params.sessionId),
  );

  app.patch<SessionParams>('/sessions/:sessionId', contextBody, async (request) => {
    const body = parseBody(patchSessionBody, request.body);
    return engine.updateSession(request.tenant, request.params.sessionId, body);
  });

  app.post('/context', async (request) => engine.addContext(request.tenant, parseBody(postContextBody, request.body)));

  app.post<SessionParams>('/sessions/:sessionId/steps', async (request) => {
    const { format, ...body } = parseBody(stepBody, request.body);
    const { tenant } = request;
    if (format === undefined) return engine.step(tenant, request.params.sessionId, body);
    const answer = await engine.step(tenant, request.params.sessionId, { ...body, format: 'neutral' });
    return format === 'neutral' ? answer : inProviderFormat(format, answer);
  });

  app.post<SessionParams>('/sessions/:sessionId/runs/restart', async (request) => {
    const { format, ...body } = parseBody(restartBody, request.body);
    const { tenant } = request;
    if (format === undefined) return engine.restartRun(tenant, request.params.sessionId, body);
    const answer = await engine.restartRun(tenant, request.params.sessionId, { ...body, format: 'neutral' });
    return format === 'neutral' ? answer : inProviderFormat(format, answer);
  });

  app.post<SessionParams>('/sessions/:sessionId/messages', async (request, reply) => {
    const body = parseMessageBody(request.body);
    const entries = await engine.appendMessages(request.tenant, request.params.sessionId, body.messages);
    return reply.status(201).send(body.batch ? { seqs: entries.map((e) => e.seq) } : { seq: entries[0]!.seq });
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
   * chunks and ends. The replay holds the newest chunks within
   * `STREAM_REPLAY_BYTES`, after one `replay_truncated` event counting the
   * older ones left out; a follower whose client leaves more than
   * `STREAM_BUFFER_BYTES` unread is dropped; at shutdown every follower gets a
   * `shutdown` event and its response ends.
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
      // The client sees the stream open even before its first event.
      reply.raw.flushHeaders();
      const { sessionId } = request.params;
      for (const frame of boundedReplay(engine.recentChunks(sessionId), streams.limits.replayBytes)) {
        reply.raw.write(frame);
      }
      if (request.query.follow === 'false') {
        reply.raw.end();
        return;
      }
      streams.follow(reply.raw, sessionId, (send) => engine.subscribe(sessionId, send));
    },
  );
}
