import Anthropic from '@anthropic-ai/sdk';
import { CtxflowClient, type ModelRequest } from '@ctxflow/client';
import { type ModelTurn, runLoop } from '@ctxflow/client/loop';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ProviderStandIn, startProviderStandIn } from '../../../test/support/provider-stand-in.ts';

let embedded: EmbeddedApp;
let client: CtxflowClient;
beforeAll(async () => {
  embedded = await buildEmbeddedApp({ config: { apiKeys: new Map(), secrets: {} } });
  client = new CtxflowClient({ baseURL: await embedded.app.listen({ port: 0, host: '127.0.0.1' }) });
});
afterAll(async () => embedded.close());

describe('@ctxflow/client/loop (neutral format)', () => {
  it('runs tools the gate allows, leaves refused calls to ctxflow, ends at __finish__', async () => {
    const { agentId } = await client.agents.create({
      context: 'You are a support agent.',
      tools: [{ name: 'lookup_order' }, { name: 'refund' }],
    });
    const { sessionId } = await client.sessions.create({ agentId });
    await client.context.add({ sessionId, items: [{ kind: 'tools', disable: ['refund'] }] });

    const seen: ModelRequest[] = [];
    const script: ModelTurn[] = [
      {
        content: 'Let me look.',
        toolCalls: [
          { callId: 'c1', name: 'lookup_order', arguments: '{"id":"7"}' },
          { callId: 'c2', name: 'refund', arguments: '{"id":"7"}' },
        ],
      },
      { content: '', toolCalls: [{ callId: 'c3', name: '__finish__', arguments: '{"result":"Shipped Monday."}' }] },
    ];
    const result = await runLoop({
      client,
      sessionId,
      userMessage: 'Where is order 7?',
      tools: { lookup_order: (args) => `order ${String(args.id)}: shipped Monday`, refund: () => 'refunded' },
      callModel: async (request) => {
        seen.push(request);
        return script[seen.length - 1]!;
      },
    });
    expect(result).toMatchObject({ steps: 2, finished: true, result: 'Shipped Monday.' });
    expect(seen[0]!.activeTools).toEqual(['lookup_order', '__finish__']);
    // The second request holds the first, then the turn: the call's result (ours) and the refusal (ctxflow's), in call order.
    expect(seen[1]!.messages.slice(0, seen[0]!.messages.length)).toEqual(seen[0]!.messages);
    expect(seen[1]!.messages.slice(seen[0]!.messages.length)).toEqual([
      { role: 'assistant', content: 'Let me look.', toolCalls: script[0]!.toolCalls },
      { role: 'tool', content: 'order 7: shipped Monday', callId: 'c1', name: 'lookup_order' },
      {
        role: 'tool',
        content: 'Not executed (tool_inactive): the tool refund is switched off.',
        callId: 'c2',
        name: 'refund',
      },
    ]);
  });

  it('the last allowed step is a forced completion', async () => {
    const { sessionId } = await client.sessions.create();
    const modes: unknown[] = [];
    const result = await runLoop({
      client,
      sessionId,
      userMessage: 'Hi',
      maxSteps: 1,
      tools: {},
      callModel: async (request) => {
        modes.push(request.toolChoice);
        return { content: 'Hello.' };
      },
    });
    expect(modes).toEqual([{ type: 'tool', name: '__finish__' }]);
    expect(result).toMatchObject({ steps: 1, finished: false, result: 'Hello.' });
  });
});

describe('@ctxflow/client/loop in the provider formats, with the official SDKs', () => {
  let standIn: ProviderStandIn;
  beforeAll(async () => {
    standIn = await startProviderStandIn();
  });
  afterAll(() => standIn.close());

  async function session() {
    const { agentId } = await client.agents.create({
      context: 'You are a support agent.',
      model: 'gpt-test',
      tools: [{ name: 'lookup_order', parameters: { type: 'object', properties: { id: { type: 'string' } } } }],
    });
    const { sessionId } = await client.sessions.create({ agentId });
    standIn.script(
      { toolCalls: [{ name: 'lookup_order', arguments: { id: '7' } }] },
      { toolCalls: [{ name: '__finish__', arguments: { result: 'Shipped Monday.' } }] },
    );
    return sessionId;
  }
  const tools = { lookup_order: () => 'order 7: shipped Monday' };

  it('openai chat.completions: the request spread into the call, the answer read by the loop', async () => {
    const openai = new OpenAI({ apiKey: 'test', baseURL: `${standIn.origin}/v1`, maxRetries: 0 });
    const from = standIn.requests.length;
    const sessionId = await session();
    const result = await runLoop({
      client,
      sessionId,
      format: 'openai-chat',
      userMessage: 'Where is order 7?',
      tools,
      callModel: (request) => openai.chat.completions.create({ model: 'gpt-test', ...request }),
    });
    expect(result).toMatchObject({ steps: 2, finished: true, result: 'Shipped Monday.' });
    expect(standIn.requests.slice(from).map((r) => [r.api, r.status])).toEqual([
      ['openai-chat', 200],
      ['openai-chat', 200],
    ]);
    const messages = await client.messages.list(sessionId);
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(messages[2]!.content).toBe('order 7: shipped Monday');
  });

  it('openai responses: the same loop', async () => {
    const openai = new OpenAI({ apiKey: 'test', baseURL: `${standIn.origin}/v1`, maxRetries: 0 });
    const from = standIn.requests.length;
    const sessionId = await session();
    const result = await runLoop({
      client,
      sessionId,
      format: 'openai-responses',
      userMessage: 'Where is order 7?',
      tools,
      callModel: (request) => openai.responses.create({ model: 'gpt-test', ...request }),
    });
    expect(result).toMatchObject({ steps: 2, finished: true, result: 'Shipped Monday.' });
    expect(standIn.requests.slice(from).map((r) => [r.api, r.status])).toEqual([
      ['openai-responses', 200],
      ['openai-responses', 200],
    ]);
  });

  it('anthropic messages: the same loop', async () => {
    const anthropic = new Anthropic({ apiKey: 'test', baseURL: standIn.origin, maxRetries: 0 });
    const from = standIn.requests.length;
    const sessionId = await session();
    const result = await runLoop({
      client,
      sessionId,
      format: 'anthropic',
      userMessage: 'Where is order 7?',
      tools,
      callModel: (request) => anthropic.messages.create({ model: 'claude-test', max_tokens: 1024, ...request }),
    });
    expect(result).toMatchObject({ steps: 2, finished: true, result: 'Shipped Monday.' });
    expect(standIn.requests.slice(from).map((r) => [r.api, r.status])).toEqual([
      ['anthropic', 200],
      ['anthropic', 200],
    ]);
    const messages = await client.messages.list(sessionId);
    expect(messages[1]!.toolCalls).toEqual([
      { callId: expect.any(String), name: 'lookup_order', arguments: '{"id":"7"}' },
    ]);
  });
});
