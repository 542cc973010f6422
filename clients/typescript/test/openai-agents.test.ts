import { CtxflowClient } from '@ctxflow/client';
import { ctxflowAgents } from '@ctxflow/client/openai-agents';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { Agent, OpenAIProvider, Runner, tool } from '@openai/agents';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startStandIn } from '../../../examples/support/stand-in-openai.ts';

let embedded: EmbeddedApp;
let client: CtxflowClient;
beforeAll(async () => {
  embedded = await buildEmbeddedApp({ config: { apiKeys: new Map(), secrets: {} } });
  client = new CtxflowClient({ baseURL: await embedded.app.listen({ port: 0, host: '127.0.0.1' }) });
});
afterAll(async () => embedded.close());

const ID = {
  type: 'object' as const,
  properties: { id: { type: 'string' } },
  required: ['id'],
  additionalProperties: false as const,
};

describe('@ctxflow/client/openai-agents with @openai/agents 0.20 (Responses API stand-in)', () => {
  it('sends ctxflow request per model call and records each turn with its calls and results', async () => {
    const provider = await startStandIn([
      { calls: [{ name: 'lookup_order', arguments: { id: '7' } }] },
      { text: 'Order 7 shipped on Monday.' },
    ]);
    const { agentId } = await client.agents.create({
      context: 'You are a support agent.',
      tools: [{ name: 'lookup_order', parameters: ID }],
    });
    const { sessionId } = await client.sessions.create({ agentId });
    await client.messages.create(sessionId, { role: 'user', content: 'Where is order 7?' });

    const lookup = tool({
      name: 'lookup_order',
      description: 'Find an order',
      parameters: z.object({ id: z.string() }),
      execute: async (input) => {
        await client.context.add({ sessionId, items: [{ kind: 'notice', content: 'Ticket 7 updated.' }] });
        return `order ${input.id}: shipped Monday`;
      },
    });
    const agent = new Agent({ name: 'support', instructions: 'replaced by ctxflow', tools: [lookup] });
    const stepIds: string[] = [];
    const ctx = ctxflowAgents({ client, sessionId, onStep: (s) => stepIds.push(s.stepId) });
    const runner = new Runner({
      modelProvider: new OpenAIProvider({ apiKey: 'stand-in', baseURL: provider.baseURL, useResponses: true }),
      callModelInputFilter: ctx.callModelInputFilter,
      tracingDisabled: true,
    });
    const result = await runner.run(agent, 'Where is order 7?');
    await ctx.record(result.history);
    await ctx.reportUsage(result.rawResponses);
    await provider.close();
    expect(result.finalOutput).toBe('Order 7 shipped on Monday.');

    const [first, second]: any[] = provider.requests;
    expect(first.instructions).toBe('You are a support agent.');
    expect(second.instructions).toBe('You are a support agent.');
    expect(second.input.slice(0, first.input.length)).toEqual(first.input);
    const added = second.input.slice(first.input.length);
    expect(added.map((i: any) => i.type ?? i.role)).toEqual(['function_call', 'function_call_output', 'system']);
    expect(added[1]).toMatchObject({ call_id: added[0].call_id });
    expect(JSON.stringify(added[2])).toContain('Ticket 7 updated.');

    const messages = await client.messages.list(sessionId);
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ['user', 'Where is order 7?'],
      ['assistant', ''],
      ['tool', 'order 7: shipped Monday'],
      ['assistant', 'Order 7 shipped on Monday.'],
    ]);
    expect(messages[1]!.toolCalls).toEqual([
      { callId: added[0].call_id, name: 'lookup_order', arguments: '{"id":"7"}' },
    ]);

    // Each model call's provider usage (the raw response the SDK kept) was reported to its step.
    const { usage } = (await client.sessions.inspect(sessionId)) as { usage: Record<string, unknown>[] };
    expect(usage.map((u) => [u.stepId, u.format, u.inputTokens, u.cachedTokens])).toEqual([
      [stepIds[0], 'openai-responses', 1, 0],
      [stepIds[1], 'openai-responses', 1, 0],
    ]);
  });
});
