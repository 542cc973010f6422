/** The tool side: the tool gate, a call's context, its approval, a client tool's answer. */
import { SCOPE } from '@ctxflow/service-kit';
import { clientAnswerRecorded, contextRecorded, toolDecision } from './answers.ts';
import { callParams, notFound, type RouteApi, type RouteContext, sessionParams } from './route-kit.ts';
import { answerBody, approvalBody, callContextBody, toolCallBody } from './schemas.ts';

export function toolCallRoutes(api: RouteApi, { engine }: RouteContext): void {
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
}
