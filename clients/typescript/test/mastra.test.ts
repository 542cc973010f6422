/**
 * `@ctxflow/client/mastra` with @mastra/core's own `Agent` and @ai-sdk/openai (Responses API,
 * streamed) pointed at the provider stand-in (test/support/provider-stand-in.ts), which refuses a
 * request that breaks the API's documented rules. One session goes through a tool call and its
 * result, a switch-off mid-run, a signed ticket update reaching the next model call, and a rewind.
 */
import { CtxflowClient } from '@ctxflow/client';
import { ctxflowMastra } from '@ctxflow/client/mastra';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type ProviderStandIn, startProviderStandIn } from '../../../test/support/provider-stand-in.ts';
import { deliverSigned, untilApplied } from '../../../test/support/signed-update.ts';

const FEED_SECRET = 'mastra-feed-secret';
const NEWS = 'Customer replied: the parcel arrived damaged';

let embedded: EmbeddedApp;
let client: CtxflowClient;
let standIn: ProviderStandIn;
beforeAll(async () => {
  embedded = await buildEmbeddedApp({
    config: { apiKeys: new Map(), secrets: { generic: [{ tenant: 'default', secret: FEED_SECRET }] } },
  });
  client = new CtxflowClient({ baseURL: await embedded.app.listen({ port: 0, host: '127.0.0.1' }) });
  standIn = await startProviderStandIn();
});
afterAll(async () => {
  await standIn.close();
  await embedded.close();
});

type Body = { input: any[]; tools: any[]; tool_choice: any; prompt_cache_key: string; stream: boolean };

describe('@ctxflow/client/mastra with @mastra/core 1.71 (its model router, Responses stand-in)', () => {
  it('tool call and result, switch-off mid-run (tools unchanged), ticket update at the next call, rewind', async () => {
    const { agentId } = await client.agents.create({
      context: 'You are the order desk.',
      tools: [
        { name: 'lookup', parameters: z.toJSONSchema(z.object({ id: z.string() })) },
        { name: 'notify', parameters: z.toJSONSchema(z.object({})) },
      ],
    });
    const { sessionId } = await client.sessions.create({ agentId });
    await client.subscriptions.create(sessionId, { source: 'generic', ticket: 'T-7' });
    const keys: string[] = [];
    const stepIds: string[] = [];
    const ctx = ctxflowMastra({
      client,
      sessionId,
      onStep: (s) => {
        keys.push(s.cache.key);
        stepIds.push(s.stepId);
      },
    });
    const lookup = createTool({
      id: 'lookup',
      description: 'Find an order.',
      strict: true,
      inputSchema: z.object({ id: z.string() }),
      execute: async ({ id }) => {
        // The app switches notify off while the run goes on: the allowed set changes, the tool list not.
        await client.context.add({ sessionId, items: [{ kind: 'tools', disable: ['notify'] }] });
        return `order ${id}: shipped Monday`;
      },
    });
    const notify = createTool({
      id: 'notify',
      description: 'Tell the customer.',
      strict: true,
      inputSchema: z.object({}),
      execute: async () => 'sent',
    });
    const agent = new Agent({
      id: 'desk',
      name: 'desk',
      instructions: 'Mastra instructions are replaced by the ctxflow system prefix.',
      // Mastra's own model router, OpenAI's Responses API at the stand-in.
      model: { id: 'openai/gpt-5-mini', url: `${standIn.origin}/v1`, apiKey: 'stand-in', api: 'responses' },
      tools: { lookup, notify },
      inputProcessors: [ctx.processor],
      outputProcessors: [ctx.processor],
    });
    const from = standIn.requests.length;
    const bodies = () => standIn.requests.slice(from).map((r) => r.body as Body);

    // Run 1: the model calls lookup, the tool runs and switches notify off, the model answers.
    standIn.script({ toolCalls: [{ name: 'lookup', arguments: { id: '7' } }] }, { text: 'Order 7 shipped.' });
    await client.messages.create(sessionId, { role: 'user', content: 'Where is order 7?' });
    const run1 = await agent.generate('Where is order 7?', { maxSteps: 5 });
    expect(run1.text).toBe('Order 7 shipped.');
    const [first, second] = bodies();
    const names = (b: Body) => b.tools.map((t: any) => t.name);
    expect(names(first!)).toEqual(['lookup', 'notify']);
    expect(second!.tools).toEqual(first!.tools);
    expect(first!.tool_choice.tools.map((t: any) => t.name)).toEqual(['lookup', 'notify']);
    expect(second!.tool_choice.tools.map((t: any) => t.name)).toEqual(['lookup']);
    expect([first!.prompt_cache_key, second!.prompt_cache_key]).toEqual([keys[0], keys[0]]);
    // ctxflow's request as it is: the prefix, the user's message; Mastra's instructions and prompt not sent.
    expect(JSON.stringify(first!.input)).not.toContain('Mastra instructions');
    expect(first!.input.map((i: any) => i.role)).toEqual(['developer', 'user']);
    expect(second!.input.slice(0, first!.input.length)).toEqual(first!.input);
    const added = second!.input.slice(first!.input.length);
    expect(added.map((i: any) => i.type ?? i.role)).toEqual(['function_call', 'function_call_output', 'developer']);
    expect(added[1]).toMatchObject({ call_id: added[0].call_id, output: 'order 7: shipped Monday' });
    const recorded = await client.messages.list(sessionId);
    expect(recorded.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(recorded[1]!.toolCalls).toEqual([{ callId: added[0].call_id, name: 'lookup', arguments: '{"id":"7"}' }]);

    // A signed ticket update reaches the next model call as a hook notice, after what was sent before.
    expect(
      await deliverSigned(embedded, FEED_SECRET, {
        eventId: `mastra-${sessionId}`,
        ticket: 'T-7',
        summary: NEWS,
        version: 1,
      }),
    ).toBe(202);
    await untilApplied(embedded);
    standIn.script({ text: 'The parcel arrived damaged.' });
    await client.messages.create(sessionId, { role: 'user', content: 'Any news?' });
    await agent.generate('Any news?', { maxSteps: 2 });
    const third = bodies()[2]!;
    expect(third.input.slice(0, second!.input.length)).toEqual(second!.input);
    expect(JSON.stringify(third.input.slice(second!.input.length))).toContain(NEWS);

    // A rewind to the second step: the next request extends the second step's request.
    await client.rewind(sessionId, { toStepId: stepIds[1]! });
    standIn.script({ text: 'Order 7 shipped on Monday.' });
    await agent.generate('Again?', { maxSteps: 2 });
    const fourth = bodies()[3]!;
    expect(fourth.input.slice(0, second!.input.length)).toEqual(second!.input);

    // Every request met the API's documented rules.
    expect(standIn.requests.slice(from).map((r) => [r.api, r.status, r.error])).toEqual(
      bodies().map(() => ['openai-responses', 200, undefined]),
    );
    expect(bodies()).toHaveLength(4);
  });
});
