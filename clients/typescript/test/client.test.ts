import { CtxflowApiError, CtxflowClient } from '@ctxflow/client';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const KEY = 'client-test-key';
let embedded: EmbeddedApp;
let baseURL = '';

beforeAll(async () => {
  embedded = await buildEmbeddedApp({ config: { apiKeys: new Map([[KEY, 'tenant-client']]), secrets: {} } });
  baseURL = await embedded.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => embedded.close());

/** A fetch that records what it sent, then sends it over the socket. */
function recordingFetch() {
  const sent: { url: string; method: string; body: unknown; authorization: string | null }[] = [];
  const fetcher: typeof fetch = async (input, init) => {
    const headers = new Headers(init?.headers);
    sent.push({
      url: String(input),
      method: init?.method ?? 'GET',
      body: typeof init?.body === 'string' ? JSON.parse(init.body) : undefined,
      authorization: headers.get('authorization'),
    });
    return fetch(input, init);
  };
  return { sent, fetcher };
}

const LOOKUP = {
  name: 'lookup_order',
  description: 'Find an order by id',
  parameters: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'], additionalProperties: false },
};

describe('@ctxflow/client against the embedded app over a socket', () => {
  it('drives a session: agent, session, context, steps, a tool call with its result, rewind', async () => {
    const { sent, fetcher } = recordingFetch();
    const client = new CtxflowClient({ baseURL, apiKey: KEY, fetch: fetcher });

    const { agentId } = await client.agents.create({
      context: 'You are a support agent.',
      model: 'gpt-test',
      tools: [LOOKUP],
    });
    expect((await client.agents.get(agentId)).tools.map((t) => t.name)).toEqual(['lookup_order', '__finish__']);
    const { sessionId } = await client.sessions.create({ agentId });
    expect(sent.every((s) => s.authorization === `Bearer ${KEY}`)).toBe(true);

    expect(
      await client.context.add({ sessionId, items: [{ kind: 'notice', content: 'Order 7 shipped.' }], key: 'k1' }),
    ).toEqual({
      recorded: 1,
    });
    expect(
      await client.context.add({ sessionId, items: [{ kind: 'notice', content: 'Order 7 shipped.' }], key: 'k1' }),
    ).toEqual({
      recorded: 0,
    });
    await client.messages.create(sessionId, { role: 'user', content: 'Where is order 7?' });

    const first = await client.step(sessionId, { format: 'neutral' });
    expect(first.request.system).toBe('You are a support agent.');
    expect(first.request.model).toBe('gpt-test');
    expect(first.request.tools.find((t) => t.name === 'lookup_order')?.parameters).toEqual(LOOKUP.parameters);
    expect(first.rows.map((r) => r.content)).toEqual(['Order 7 shipped.']);
    expect(first.cache.key).toMatch(/^ctxflow-[0-9a-f]{32}$/);
    // The step sent a requestId made for the call.
    expect(sent.find((s) => s.url.endsWith('/steps'))!.body).toMatchObject({
      requestId: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });

    expect(await client.toolCalls.gate(sessionId, { callId: 'c1', name: 'lookup_order' })).toEqual({ execute: true });
    const { seqs } = await client.messages.createBatch(sessionId, [
      { role: 'assistant', content: '', toolCalls: [{ callId: 'c1', name: 'lookup_order', arguments: '{"id":"7"}' }] },
      { role: 'tool', callId: 'c1', content: 'shipped on Monday' },
    ]);
    expect(seqs).toHaveLength(2);

    const second = await client.step(sessionId, { format: 'neutral' });
    expect(second.request.messages.slice(-2)).toEqual([
      { role: 'assistant', content: '', toolCalls: [{ callId: 'c1', name: 'lookup_order', arguments: '{"id":"7"}' }] },
      { role: 'tool', content: 'shipped on Monday', callId: 'c1', name: 'lookup_order' },
    ]);
    expect(second.cache.previousEnd).toBe(first.request.messages.length);
    // Prefix stability (R3): the first request is a prefix of the second.
    expect(second.request.messages.slice(0, first.request.messages.length)).toEqual(first.request.messages);

    const messages = await client.messages.list(sessionId);
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);

    const rewound = await client.rewind(sessionId, { beforeStepId: second.stepId });
    expect(rewound.activeTools).toContain('lookup_order');
    const again = await client.step(sessionId, { format: 'neutral' });
    expect(again.request.messages).toEqual(second.request.messages);

    // Without a format the answer is the neutral request; a provider format gives that API's body.
    const chat = await client.step(sessionId, { format: 'openai-chat' });
    expect(chat.request.prompt_cache_key).toBe(first.cache.key);
    expect(chat.request.messages.at(-1)).toEqual({ role: 'tool', content: 'shipped on Monday', tool_call_id: 'c1' });

    const branch = await client.branches.create(sessionId, { atStepId: first.stepId });
    expect((await client.sessions.get(branch.sessionId)).branchOf).toEqual({ sessionId, atStepId: first.stepId });
  });

  it('a step delta with since; sessions and agents erased (204, again 204; 409 state_agent_in_use without cascade)', async () => {
    const client = new CtxflowClient({ baseURL, apiKey: KEY });
    const { agentId } = await client.agents.create({ context: 'You are a support agent.' });
    const { sessionId } = await client.sessions.create({ agentId });
    await client.messages.create(sessionId, { role: 'user', content: 'Hello' });
    const full = await client.step(sessionId, { format: 'neutral' });
    await client.messages.create(sessionId, { role: 'assistant', content: 'Hi.' });
    await client.messages.create(sessionId, { role: 'user', content: 'Order 7?' });
    const delta = await client.step(sessionId, { format: 'neutral', since: full.request.messages.length });
    expect(delta.request.since).toBe(full.request.messages.length);
    expect(delta.request.messages.map((m) => m.content)).toEqual(['Hi.', 'Order 7?']);

    const refused = await client.agents.delete(agentId).catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 409, code: 'state_agent_in_use', retryable: false });
    expect(await client.sessions.delete(sessionId)).toBeUndefined();
    expect(await client.sessions.delete(sessionId)).toBeUndefined();
    await expect(client.sessions.get(sessionId)).rejects.toMatchObject({
      status: 404,
      code: 'state_session_not_found',
    });
    const second = await client.sessions.create({ agentId });
    expect(await client.agents.delete(agentId, { cascade: true })).toBeUndefined();
    await expect(client.sessions.get(second.sessionId)).rejects.toMatchObject({ status: 404 });
    await expect(client.agents.get(agentId)).rejects.toMatchObject({ status: 404, code: 'state_agent_not_found' });
  });

  it('a 404 is a typed CtxflowApiError, sent once (not retryable)', async () => {
    const { sent, fetcher } = recordingFetch();
    const client = new CtxflowClient({ baseURL, apiKey: KEY, fetch: fetcher, retryDelayMs: 1 });
    const error = await client.step('no-such-session', { format: 'neutral' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CtxflowApiError);
    expect(error).toMatchObject({ status: 404, code: 'state_session_not_found', retryable: false });
    expect(sent).toHaveLength(1);

    const anonymous = new CtxflowClient({ baseURL });
    await expect(anonymous.sessions.list()).rejects.toMatchObject({ status: 401, code: 'unauthorized' });
    const bad = await client.agents.create({ tools: [{ name: 'has.dot' }] }).catch((e: unknown) => e);
    expect(bad).toMatchObject({ status: 400, code: 'validation_error', retryable: false });
    expect(bad).toMatchObject({ details: expect.anything() });
  });

  it('a 503 is retried with the same idempotency key and the same step requestId', async () => {
    const real = new CtxflowClient({ baseURL, apiKey: KEY });
    const { sessionId } = await real.sessions.create();

    const bodies: { url: string; body: Record<string, unknown> }[] = [];
    let refusals = 0;
    const flaky: typeof fetch = async (input, init) => {
      bodies.push({ url: String(input), body: JSON.parse(String(init?.body)) });
      // The first attempt of each request: the store did not answer (the server's own refusal form).
      if (bodies.length % 2 === 1) {
        refusals++;
        return new Response(
          JSON.stringify({
            error: { code: 'store_unavailable', message: 'the store did not answer', retryable: true },
          }),
          { status: 503, headers: { 'content-type': 'application/json' } },
        );
      }
      return fetch(input, init);
    };
    const client = new CtxflowClient({ baseURL, apiKey: KEY, fetch: flaky, retryDelayMs: 1 });

    expect(await client.context.add({ sessionId, items: [{ kind: 'instruction', content: 'Be brief.' }] })).toEqual({
      recorded: 1,
    });
    expect(bodies).toHaveLength(2);
    expect(bodies[0]!.body.key).toEqual(expect.any(String));
    expect(bodies[1]!.body.key).toBe(bodies[0]!.body.key);

    const step = await client.step(sessionId, { format: 'neutral' });
    expect(bodies).toHaveLength(4);
    expect(bodies[3]!.body.requestId).toBe(bodies[2]!.body.requestId);
    expect(step.rows.map((r) => r.content)).toEqual(['Be brief.']);
    expect(refusals).toBe(2);

    // A second logical call makes a new key.
    await client.context.add({ sessionId, items: [{ kind: 'instruction', content: 'Be brief.' }] });
    expect(bodies[5]!.body.key).not.toBe(bodies[0]!.body.key);
  });

  it('gives up after maxRetries and throws the last refusal', async () => {
    let calls = 0;
    const down: typeof fetch = async () => {
      calls++;
      return new Response('bad gateway', { status: 502 });
    };
    const client = new CtxflowClient({ baseURL, fetch: down, maxRetries: 2, retryDelayMs: 1 });
    await expect(client.sessions.list()).rejects.toMatchObject({
      status: 502,
      code: 'unexpected_answer',
      retryable: true,
    });
    expect(calls).toBe(3);
  });

  it('a lost answer is retried only where sending again is safe', async () => {
    let calls = 0;
    const lost: typeof fetch = async () => {
      calls++;
      throw new TypeError('fetch failed');
    };
    const client = new CtxflowClient({ baseURL, fetch: lost, maxRetries: 1, retryDelayMs: 1 });
    await expect(client.messages.create('s', { role: 'user', content: 'hi' })).rejects.toMatchObject({
      status: 0,
      code: 'network_error',
      retryable: false,
    });
    expect(calls).toBe(1);
    await expect(client.step('s')).rejects.toMatchObject({ code: 'network_error', retryable: true });
    expect(calls).toBe(3);
  });
});
