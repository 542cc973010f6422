/** The conversation routes: context from the app, the context pass (steps, restarts), messages. */
import { SCOPE } from '@ctxflow/service-kit';
import type { NeutralStepResult } from '../domain/context-engine.ts';
import type { ProviderFormat, ProviderFormats } from '../domain/provider-formats/index.ts';
import { contextRecorded, messageList, messagesAppended, stepAnswer } from './answers.ts';
import { conflict, notFound, type RouteApi, type RouteContext, sessionParams } from './route-kit.ts';
import { appendMessagesBody, postContextBody, restartBody, stepBody } from './schemas.ts';

/**
 * A step answer with its `format`: the neutral request (the default), or its `request` in a
 * provider's format, that API's body without `model` (and `max_tokens`). Rows, cursor and
 * cache hints are the neutral answer's.
 */
function inFormat(
  { toProviderRequest }: ProviderFormats,
  format: ProviderFormat | 'neutral' | undefined,
  answer: NeutralStepResult,
) {
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

export function stepRoutes(api: RouteApi, { engine, formats }: RouteContext): void {
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
      return inFormat(formats, format, await engine.step(request.tenant, request.params.sessionId, body));
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
      return inFormat(formats, format, await engine.restartRun(request.tenant, request.params.sessionId, body));
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
}
