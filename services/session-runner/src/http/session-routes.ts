import { CtxflowError, idSchema, MAX_CONTEXT_BODY_BYTES } from '@ctxflow/contracts';
import { ERROR_ANSWERS, requireScope, SCOPE, type ZodTypeProvider } from '@ctxflow/service-kit';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ContextEngine, NeutralStepResult } from '../domain/context-engine.ts';
import type { AgentRecord } from '../domain/model.ts';
import { type ProviderFormat, toProviderRequest } from '../domain/provider-formats/index.ts';
import {
  agent,
  agentCreated,
  agentUpdated,
  clientAnswerRecorded,
  contextRecorded,
  memoryAdded,
  messageList,
  messagesAppended,
  rewindResult,
  sessionCreated,
  sessionInspection,
  sessionList,
  sessionSnapshot,
  sessionUpdated,
  stepAnswer,
  toolDecision,
} from './answers.ts';
import {
  answerBody,
  appendMessagesBody,
  approvalBody,
  branchBody,
  callContextBody,
  createAgentBody,
  createSessionBody,
  deleteAgentQuery,
  memoryBody,
  patchAgentBody,
  patchSessionBody,
  postContextBody,
  restartBody,
  rewindBody,
  stepBody,
  streamHeaders,
  streamQuery,
  toolCallBody,
} from './schemas.ts';
import { boundedReplay, eventsAfter, StreamFollowers } from './stream-followers.ts';

export interface SessionRoutesDeps {
  engine: ContextEngine;
  /** The server's stream followers (their limits; ended at close). Default: one per registration, default limits. */
  streams?: StreamFollowers;
  /** Live sessions a tenant may have (CTXFLOW_TENANT_MAX_SESSIONS); absent: no cap. */
  maxSessions?: number;
}

const agentParams = z.object({ agentId: idSchema });
const sessionParams = z.object({ sessionId: idSchema });
const callParams = z.object({ sessionId: idSchema, callId: idSchema });
const { 404: notFound, 409: conflict } = ERROR_ANSWERS;

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
 * A step answer with its `format`: the neutral request (the default), or its `request` in a
 * provider's format, that API's body without `model` (and `max_tokens`). Rows, cursor and
 * cache hints are the neutral answer's.
 */
function inFormat(format: ProviderFormat | 'neutral' | undefined, answer: NeutralStepResult) {
  const { request, cache } = answer;
  switch (format) {
    case undefined:
    case 'neutral':
      return { format: 'neutral' as const, ...answer };
    case 'openai-chat':
      return { ...answer, format, request: toProviderRequest(format, request, cache) };
    case 'openai-responses':
      return { ...answer, format, request: toProviderRequest(format, request, cache) };
    case 'anthropic':
      return { ...answer, format, request: toProviderRequest(format, request, cache) };
  }
}

/**
 * The session-runner's HTTP contract and its tool-side routes (README.md "HTTP API").
 * Register inside a scope that sets `request.tenant`. Each route's block declares its whole
 * contract (params, body, every answer), which is why this file is long: the declarations are
 * the contract, and /openapi.json is generated from them.
 */
export async function sessionRoutes(app: FastifyInstance, deps: SessionRoutesDeps) {
  const { engine, maxSessions } = deps;
  /** A new session (created or branched) over the tenant's cap: 429 `quota_exceeded`, nothing written. */
  const withinQuota = async (tenant: string) => {
    if (maxSessions === undefined) return;
    const live = await engine.listSessions(tenant, maxSessions);
    if (live.length >= maxSessions) {
      throw new CtxflowError(
        'quota_exceeded',
        `the tenant has ${maxSessions} live sessions, its cap (CTXFLOW_TENANT_MAX_SESSIONS): erase one first`,
      );
    }
  };
  const streams = deps.streams ?? new StreamFollowers(undefined, app.log);
  // Before the server stops listening: open streams end (a `shutdown` event, then the response ends),
  // so closing waits for no follower.
  app.addHook('preClose', async () => streams.endAll());
  const api = app.withTypeProvider<ZodTypeProvider>();
  const agents = { tags: ['agents'] };
  const sessions = { tags: ['sessions'] };
  // Routes whose body is context blocks: a body far past the context limit is refused before it is
  // parsed, so no request holds the event loop parsing megabytes it would refuse anyway.
  const contextBody = { bodyLimit: MAX_CONTEXT_BODY_BYTES };

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

  api.post(
    '/context',
    {
      config: { scope: SCOPE.write },
      schema: {
        tags: ['context'],
        operationId: 'addContext',
        summary: 'Add context items (idempotent with `key`)',
        body: postContextBody,
        response: { 200: contextRecorded, 404: notFound, 409: conflict },
      },
    },
    async (request) => engine.addContext(request.tenant, request.body),
  );

  const steps = { tags: ['steps'] };
  api.post(
    '/sessions/:sessionId/steps',
    {
      config: { scope: SCOPE.write },
      schema: {
        ...steps,
        operationId: 'runStep',
        summary: 'The context pass before one model call (idempotent with `requestId`)',
        params: sessionParams,
        body: stepBody,
        response: { 200: stepAnswer, 404: notFound, 409: conflict },
      },
    },
    async (request) => {
      const { format, ...body } = request.body;
      return inFormat(format, await engine.step(request.tenant, request.params.sessionId, body));
    },
  );

  api.post(
    '/sessions/:sessionId/runs/restart',
    {
      config: { scope: SCOPE.write },
      schema: {
        ...steps,
        operationId: 'restartRun',
        summary: 'Restart a failed run from its start',
        params: sessionParams,
        body: restartBody,
        response: { 200: stepAnswer, 404: notFound, 409: conflict },
      },
    },
    async (request) => {
      const { format, ...body } = request.body;
      return inFormat(format, await engine.restartRun(request.tenant, request.params.sessionId, body));
    },
  );

  const messages = { tags: ['messages'] };
  api.post(
    '/sessions/:sessionId/messages',
    {
      config: { scope: SCOPE.write },
      schema: {
        ...messages,
        operationId: 'appendMessages',
        summary: 'Record a message, or `{ messages }` in one write',
        params: sessionParams,
        body: appendMessagesBody,
        response: { 201: messagesAppended, 404: notFound, 409: conflict },
      },
    },
    async (request, reply) => {
      const { messages: batch, ...single } = request.body;
      const input = batch ?? [single as (typeof batch & object)[number]];
      const entries = await engine.appendMessages(request.tenant, request.params.sessionId, input);
      return reply.status(201).send(batch ? { seqs: entries.map((e) => e.seq) } : { seq: entries[0]!.seq });
    },
  );

  api.get(
    '/sessions/:sessionId/messages',
    {
      config: { scope: SCOPE.read },
      schema: {
        ...messages,
        operationId: 'listMessages',
        summary: 'Messages a user may see',
        params: sessionParams,
        response: { 200: messageList, 404: notFound },
      },
    },
    async (request) => ({ messages: await engine.listMessages(request.tenant, request.params.sessionId) }),
  );

  const calls = { tags: ['tool-calls'] };
  api.post(
    '/sessions/:sessionId/tool-calls',
    {
      config: { scope: SCOPE.write },
      schema: {
        ...calls,
        operationId: 'gateToolCall',
        summary: 'The tool gate',
        params: sessionParams,
        body: toolCallBody,
        response: { 200: toolDecision, 404: notFound },
      },
    },
    async (request) => engine.gateToolCall(request.tenant, request.params.sessionId, request.body),
  );

  api.post(
    '/sessions/:sessionId/tool-calls/:callId/context',
    {
      config: { scope: SCOPE.write },
      schema: {
        ...calls,
        operationId: 'addCallContext',
        summary: "A tool's or hook's addContext (first wins)",
        params: callParams,
        body: callContextBody,
        response: { 200: contextRecorded, 404: notFound },
      },
    },
    async (request) =>
      engine.addCallContext(request.tenant, request.params.sessionId, {
        ...request.body,
        callId: request.params.callId,
      }),
  );

  api.post(
    '/sessions/:sessionId/tool-calls/:callId/approval',
    {
      config: { scope: SCOPE.write },
      schema: {
        ...calls,
        operationId: 'answerApproval',
        summary: 'Approve or deny a call',
        params: callParams,
        body: approvalBody,
        response: { 200: toolDecision, 404: notFound },
      },
    },
    async (request) =>
      engine.answerApproval(request.tenant, request.params.sessionId, request.params.callId, request.body.approved),
  );

  api.post(
    '/sessions/:sessionId/tool-calls/:callId/answer',
    {
      config: { scope: SCOPE.write },
      schema: {
        ...calls,
        operationId: 'answerClientCall',
        summary: "A client tool's answer",
        params: callParams,
        body: answerBody,
        response: { 200: clientAnswerRecorded, 404: notFound },
      },
    },
    async (request) =>
      engine.answerClientCall(request.tenant, request.params.sessionId, request.params.callId, request.body.content),
  );

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

  /**
   * Server-sent events: `message`, `step`, `rewind` and `context_skipped`
   * chunks, never a context row (R4, R26). `?follow=false` replays the recent
   * chunks and ends. The replay holds the newest chunks within
   * `STREAM_REPLAY_BYTES`, after one `replay_truncated` event counting the
   * older ones left out; a follower whose client leaves more than
   * `STREAM_BUFFER_BYTES` unread is dropped; each chunk carries an event id, and a
   * client that reconnects with `Last-Event-ID` is replayed what came after it; at
   * shutdown every follower gets a
   * `shutdown` event and its response ends.
   */
  api.get(
    '/sessions/:sessionId/stream',
    {
      config: { scope: SCOPE.read },
      schema: {
        ...sessions,
        operationId: 'streamSession',
        summary: 'Server-sent events (`?follow=false` replays and ends)',
        params: sessionParams,
        querystring: streamQuery,
        headers: streamHeaders,
        produces: ['text/event-stream'],
        response: { 200: z.string().describe('Server-sent events'), 404: notFound },
      },
    },
    async (request, reply) => {
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
      const replay = eventsAfter(engine.recentEvents(sessionId), request.headers['last-event-id']);
      for (const frame of boundedReplay(replay.events, streams.limits.replayBytes, replay.omitted)) {
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
