import { createOpenAI } from '@ai-sdk/openai';
import { CtxflowClient } from '@ctxflow/client';
import { ctxflowAiSdk } from '@ctxflow/client/ai-sdk';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { generateText, stepCountIs, tool } from 'ai';
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

const ORDER = z.object({ id: z.string() });
const ID = z.toJSONSchema(ORDER);

describe('@ctxflow/client/ai-sdk with ai 7 and @ai-sdk/openai 4 (Responses API stand-in)', () => {
  it('keeps the tool list, sends the active set as allowed_tools, context rows in place, one batch per step', async () => {
    const provider = await startStandIn([
      { calls: [{ name: 'lookup_order', arguments: { id: '7' } }] },
      { calls: [{ name: '__finish__', arguments: { result: 'Shipped Monday.' } }] },
    ]);
    const { agentId } = await client.agents.create({
      context: 'You are a support agent.',
      tools: [
        { name: 'lookup_order', parameters: ID },
        { name: 'refund', parameters: ID },
      ],
    });
    const { sessionId } = await client.sessions.create({ agentId });
    await client.messages.create(sessionId, { role: 'user', content: 'Where is order 7?' });
    await client.context.add({ sessionId, items: [{ kind: 'notice', content: 'Ticket 7: customer called again.' }] });

    const tools = {
      lookup_order: tool({
        inputSchema: ORDER,
        execute: async (input) => {
          // The app switches refunds off while the run goes on: the next call's allowed set changes, the tool list not.
          await client.context.add({ sessionId, items: [{ kind: 'tools', disable: ['refund'] }] });
          return `order ${input.id}: shipped Monday`;
        },
      }),
      refund: tool({ inputSchema: ORDER, execute: async () => 'refunded' }),
      __finish__: tool({ inputSchema: z.object({ result: z.string().optional() }) }),
    };
    const steps: string[] = [];
    const stepIds: string[] = [];
    const ctx = ctxflowAiSdk({
      client,
      sessionId,
      tools,
      onStep: (s) => {
        steps.push(s.cache.key);
        stepIds.push(s.stepId);
      },
    });
    const openai = createOpenAI({ baseURL: provider.baseURL, apiKey: 'stand-in' });
    const result = await generateText({
      model: openai('gpt-5-mini'),
      tools,
      prompt: 'Where is order 7?',
      allowSystemInMessages: true,
      // Step results keep the provider's answer body, whose usage the adapter reports.
      include: { responseBody: true },
      prepareStep: ctx.prepareStep,
      onStepFinish: ctx.onStepFinish,
      stopWhen: [stepCountIs(5), ctx.finished],
    });
    await provider.close();
    expect(result.steps).toHaveLength(2);

    const [first, second]: any[] = provider.requests;
    const names = (r: any) => r.tools.map((t: any) => t.name);
    expect(names(first)).toEqual(['lookup_order', 'refund', '__finish__']);
    expect(second.tools).toEqual(first.tools);
    expect(first.tool_choice).toEqual({
      type: 'allowed_tools',
      mode: 'auto',
      tools: ['lookup_order', 'refund', '__finish__'].map((name) => ({ type: 'function', name })),
    });
    expect(second.tool_choice.tools.map((t: any) => t.name)).toEqual(['lookup_order', '__finish__']);
    expect(first.prompt_cache_key).toBe(steps[0]);
    expect(second.prompt_cache_key).toBe(steps[0]);

    // The second input starts with the first one (the prompt cache prefix), then the call, its output, the switch-off row.
    expect(second.input.slice(0, first.input.length)).toEqual(first.input);
    const added = second.input.slice(first.input.length);
    // A row of system form goes as the provider's system role (`developer` for this reasoning model).
    expect(added.map((i: any) => i.type ?? i.role)).toEqual(['function_call', 'function_call_output', 'developer']);
    expect(added[1]).toMatchObject({ call_id: added[0].call_id, output: 'order 7: shipped Monday' });
    expect(JSON.stringify(first.input)).toContain('Ticket 7: customer called again.');

    const messages = await client.messages.list(sessionId);
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(messages[1]!.toolCalls).toEqual([
      { callId: added[0].call_id, name: 'lookup_order', arguments: '{"id":"7"}' },
    ]);

    // Each step's provider usage, read from the raw answer, was reported to that step.
    const { usage } = (await client.sessions.inspect(sessionId)) as { usage: Record<string, unknown>[] };
    expect(usage.map((u) => [u.stepId, u.format, u.inputTokens, u.cachedTokens])).toEqual([
      [stepIds[0], 'openai-responses', 1, 0],
      [stepIds[1], 'openai-responses', 1, 0],
    ]);
  });
});
