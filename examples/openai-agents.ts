// An OpenAI Agents SDK run on ctxflow, against a local stand-in for OpenAI's Responses API.
// Run: `npm start`, then `node --conditions=ctxflow-source examples/openai-agents.ts` (CTXFLOW_URL, CTXFLOW_API_KEY).
import { CtxflowClient } from '@ctxflow/client';
import { ctxflowAgents } from '@ctxflow/client/openai-agents';
import { Agent, OpenAIProvider, Runner, tool } from '@openai/agents';
import { z } from 'zod';
import { startStandIn } from './support/stand-in-openai.ts';

const provider = await startStandIn([
  { calls: [{ name: 'lookup_order', arguments: { id: '7' } }] },
  { text: 'Order 7 shipped on Monday.' },
]);
const client = new CtxflowClient({
  baseURL: process.env.CTXFLOW_URL ?? 'http://127.0.0.1:8080',
  apiKey: process.env.CTXFLOW_API_KEY,
});
const lookup = tool({
  name: 'lookup_order',
  description: 'Find an order',
  parameters: z.object({ id: z.string() }),
  execute: async ({ id }) => `order ${id}: shipped Monday`,
});
const { agentId } = await client.agents.create({
  context: 'You are a support agent.',
  tools: [
    { name: 'lookup_order', description: 'Find an order', parameters: z.toJSONSchema(z.object({ id: z.string() })) },
  ],
});
const { sessionId } = await client.sessions.create({ agentId });
await client.messages.create(sessionId, { role: 'user', content: 'Where is order 7?' });

const ctx = ctxflowAgents({ client, sessionId });
const runner = new Runner({
  modelProvider: new OpenAIProvider({ apiKey: 'stand-in', baseURL: provider.baseURL, useResponses: true }),
  callModelInputFilter: ctx.callModelInputFilter,
  tracingDisabled: true,
});
const result = await runner.run(new Agent({ name: 'support', tools: [lookup] }), 'Where is order 7?');
await ctx.record(result.history);

const roles = (await client.messages.list(sessionId)).map((m) => m.role);
console.log(JSON.stringify({ output: result.finalOutput, requests: provider.requests.length, roles }));
await provider.close();
