/**
 * A refusal names what was not found or wrong, never the caller's text: ids from the path
 * or the body, keys, property names, tool names, kinds and event types carrying shell and
 * HTML metacharacters appear nowhere in the answer (status line aside: body and headers),
 * raw or %-encoded. Each refusal's exact message is asserted.
 */
import { createHmac } from 'node:crypto';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { parseApiKeys } from '@ctxflow/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const KEY = 'no-echo-key';
const CE_SECRET = 'no-echo-cloudevents-secret';

/** Ids as a hostile or careless client sends them. */
const EVIL = ['$(touch x)', '<script>alert(1)</script>', `a'b"c;\`id\`|&>x`, '../../etc/passwd%00{{7*7}}'];

let embedded: EmbeddedApp;
let sessionId = '';
let agentId = '';

interface Answer {
  status: number;
  text: string;
  headers: string;
  body: { error?: { code: string; message: string; retryable: boolean } } | undefined;
}

async function call(
  method: string,
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const response = await embedded.app.inject({
    method: method as 'POST',
    url,
    headers: {
      authorization: `Bearer ${KEY}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    ...(body === undefined ? {} : { payload: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = response.body;
  return {
    status: response.statusCode,
    text,
    headers: JSON.stringify(response.headers),
    body: text && response.headers['content-type']?.toString().includes('json') ? JSON.parse(text) : undefined,
  };
}

/** The answer is the refusal given, and the caller's text is nowhere in it. */
function expectRefusal(answer: Answer, evil: string, status: number, code: string, message: string, details?: unknown) {
  expect({ status: answer.status, error: answer.body?.error }).toEqual({
    status,
    error: { code, message, retryable: false, ...(details === undefined ? {} : { details }) },
  });
  for (const form of [evil, encodeURIComponent(evil), JSON.stringify(evil).slice(1, -1)]) {
    expect(answer.text, `the answer quotes ${form}`).not.toContain(form);
    expect(answer.headers, `a header quotes ${form}`).not.toContain(form);
  }
}

beforeAll(async () => {
  embedded = await buildEmbeddedApp({
    config: { apiKeys: parseApiKeys(`echo:${KEY}`), secrets: { cloudevents: CE_SECRET } },
  });
  agentId = ((await call('POST', '/agents', {})).body as unknown as { agentId: string }).agentId;
  sessionId = ((await call('POST', '/sessions', { agentId })).body as unknown as { sessionId: string }).sessionId;
  expect((await call('POST', `/sessions/${sessionId}/messages`, { role: 'user', content: 'Hi' })).status).toBe(201);
  expect((await call('POST', `/sessions/${sessionId}/steps`, {})).status).toBe(200);
});

afterAll(async () => {
  await embedded?.close();
});

describe.each(EVIL)('the id %s', (evil) => {
  const id = encodeURIComponent(evil);

  it('in the path of every session route is "session not found"', async () => {
    const s = `/sessions/${id}`;
    for (const [method, url, body] of [
      ['GET', s],
      ['GET', `${s}/inspect`],
      ['PATCH', s, { forceRefresh: true }],
      ['POST', `${s}/steps`, {}],
      ['POST', `${s}/runs/restart`, {}],
      ['POST', `${s}/messages`, { role: 'user', content: 'x' }],
      ['GET', `${s}/messages`],
      ['POST', `${s}/tool-calls`, { callId: 'c1', name: 'deploy' }],
      ['POST', `${s}/tool-calls/c1/context`, { items: [{ kind: 'notice', content: 'x' }] }],
      ['POST', `${s}/tool-calls/c1/approval`, { approved: true }],
      ['POST', `${s}/tool-calls/c1/answer`, { content: 'x' }],
      ['POST', `${s}/rewind`, { toStepId: 'x' }],
      ['POST', `${s}/branches`, {}],
      ['GET', `${s}/stream?follow=false`],
      ['GET', `${s}/subscriptions`],
      ['POST', `${s}/subscriptions`, { source: 'generic', ticket: 'T' }],
    ] as const) {
      const answer = await call(method, url, body);
      expectRefusal(answer, evil, 404, 'state_session_not_found', 'session not found');
    }
  });

  it('as a session id in a body is "session not found"', async () => {
    const answer = await call('POST', '/context', { sessionId: evil, items: [{ kind: 'notice', content: 'x' }] });
    expectRefusal(answer, evil, 404, 'state_session_not_found', 'session not found');
  });

  it('of an agent, in the path or the body, is "agent not found"', async () => {
    for (const [method, url, body] of [
      ['GET', `/agents/${id}`],
      ['PATCH', `/agents/${id}`, { model: 'm' }],
      ['POST', `/agents/${id}/memories`, { content: 'x' }],
      ['POST', '/sessions', { agentId: evil }],
    ] as const) {
      expectRefusal(await call(method, url, body), evil, 404, 'state_agent_not_found', 'agent not found');
    }
  });

  it('of a step is "no such step in this session"', async () => {
    for (const [url, body] of [
      [`/sessions/${sessionId}/rewind`, { toStepId: evil }],
      [`/sessions/${sessionId}/rewind`, { beforeStepId: evil }],
      [`/sessions/${sessionId}/branches`, { atStepId: evil }],
    ] as const) {
      const answer = await call('POST', url, body);
      expectRefusal(answer, evil, 404, 'state_step_not_found', 'no such step in this session');
    }
  });

  it('of a call: approval "no such call in this session", answer "the call is not waiting for a client answer"', async () => {
    const calls = `/sessions/${sessionId}/tool-calls/${id}`;
    expectRefusal(
      await call('POST', `${calls}/approval`, { approved: true }),
      evil,
      404,
      'state_call_not_found',
      'no such call in this session',
    );
    expectRefusal(
      await call('POST', `${calls}/answer`, { content: 'x' }),
      evil,
      404,
      'state_call_not_found',
      'the call is not waiting for a client answer',
    );
  });

  it('as the callId of a tool result no call has is a validation_error naming callId', async () => {
    const answer = await call('POST', `/sessions/${sessionId}/messages`, { role: 'tool', callId: evil, content: 'x' });
    expectRefusal(
      answer,
      evil,
      400,
      'validation_error',
      'message: callId matches no call of an earlier assistant message and no call the gate knows',
    );
  });

  it('as an idempotency key used with other items is a key conflict naming key', async () => {
    const body = (content: string) => ({ sessionId, key: evil, items: [{ kind: 'notice', content }] });
    expect((await call('POST', '/context', body('first'))).status).toBe(200);
    expectRefusal(
      await call('POST', '/context', body('second')),
      evil,
      409,
      'state_context_key_conflict',
      'key: used before with other items; send new items under a new key',
    );
  });

  it('as a block id twice, a kind, or a property name is a validation_error naming where', async () => {
    const twice = await call('POST', '/agents', {
      context: [
        { id: evil, content: 'a' },
        { id: evil, content: 'b' },
      ],
    });
    expectRefusal(twice, evil, 400, 'validation_error', 'context.1.id: the id of an earlier block; an id appears once');
    const kind = await call('POST', '/context', { sessionId, items: [{ kind: evil, content: 'x' }] });
    expectRefusal(
      kind,
      evil,
      400,
      'validation_error',
      'items[0]: kind: a string that is no kind; expected one of instruction, notice, tools, memory',
      [
        {
          path: [0, 'kind'],
          message: "Invalid discriminator value. Expected 'instruction' | 'notice' | 'memory' | 'tools'",
        },
      ],
    );
    const property = await call('POST', '/agents', { [evil]: 1 });
    expectRefusal(
      property,
      evil,
      400,
      'validation_error',
      'body: 1 unknown property (this object takes only the properties it declares)',
      [{ path: [], message: '1 unknown property (this object takes only the properties it declares)' }],
    );
    const parameters = await call('POST', '/agents', {
      tools: [{ name: 'search', parameters: { type: 'object', properties: { [evil]: { type: 'text' } } } }],
    });
    expectRefusal(
      parameters,
      evil,
      400,
      'validation_error',
      'tools.0.parameters: is not a JSON Schema: parameters/properties/*/type must be equal to one of the allowed values, ' +
        'parameters/properties/*/type must be array, parameters/properties/*/type must match a schema in anyOf',
    );
  });

  it('as a CloudEvents type is "type: not accepted"', async () => {
    const event = JSON.stringify({
      specversion: '1.0',
      id: 'e1',
      source: 'tickets',
      type: evil,
      subject: 'T-1',
      data: { summary: 's' },
    });
    const ts = String(Math.floor(Date.now() / 1000));
    const signature = createHmac('sha256', CE_SECRET).update(`${ts}.${event}`).digest('hex');
    const answer = await call('POST', '/feeds/cloudevents', event, {
      'content-type': 'application/cloudevents+json',
      'x-ctxflow-timestamp': ts,
      'x-ctxflow-signature': `sha256=${signature}`,
    });
    expectRefusal(
      answer,
      evil,
      400,
      'validation_error',
      'type: not accepted (expected dev.ctxflow.ticket.<kind>, e.g. dev.ctxflow.ticket.updated)',
    );
  });
});

describe('refusals about existing things name them without their ids', () => {
  it('an agent in use: "the agent has 1 session(s)"', async () => {
    const agent = ((await call('POST', '/agents', {})).body as unknown as { agentId: string }).agentId;
    expect((await call('POST', '/sessions', { agentId: agent })).status).toBe(201);
    const answer = await call('DELETE', `/agents/${agent}`);
    expect(answer.body?.error).toEqual({
      code: 'state_agent_in_use',
      message: 'the agent has 1 session(s); delete them, or the agent with ?cascade=true',
      retryable: false,
    });
    expect(answer.text).not.toContain(agent);
  });

  it('calls without a result: counted in the message, named only in details.pending', async () => {
    const evil = EVIL[0]!;
    const session = ((await call('POST', '/sessions', {})).body as unknown as { sessionId: string }).sessionId;
    const asked = await call('POST', `/sessions/${session}/messages`, {
      role: 'assistant',
      content: '',
      toolCalls: [{ callId: evil, name: 'search', arguments: '{}' }],
    });
    expect(asked.status).toBe(201);
    const answer = await call('POST', `/sessions/${session}/messages`, { role: 'user', content: 'and?' });
    expect(answer.status).toBe(409);
    expect(answer.body?.error?.message).toBe(
      "message (user): 1 call of the last assistant message has no result yet (details.pending); record their results (POST /sessions/:sessionId/messages), or wait for the client's answer, its deadline or the approval, then send it again",
    );
    expect(answer.body?.error?.message).not.toContain(evil);
    expect(answer.body?.error?.message).not.toContain('search');
  });

  it('a tool name declared twice is named by its index', async () => {
    const answer = await call('POST', '/agents', { tools: [{ name: 'lookup' }, { name: 'lookup' }] });
    expectRefusal(
      answer,
      'lookup',
      400,
      'validation_error',
      'tools.1.name: the name of an earlier tool; a name is declared once',
    );
  });
});
