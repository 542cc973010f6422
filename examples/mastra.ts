// A Mastra agent on ctxflow, against a local stand-in for OpenAI's Responses API.
// Run: `npm start`, then `node --conditions=ctxflow-source examples/mastra.ts` (CTXFLOW_URL, CTXFLOW_API_KEY).
import { CtxflowClient } from '@ctxflow/client';
import { ctxflowMastra } from '@ctxflow/client/mastra';
import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
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

const order = z.object({ id: z.string() });
const { agentId } = await client.agents.create({
  context: 'You are a support agent.',
  tools: [{ name: 'lookup_order', description: 'Find an order', parameters: z.toJSONSchema(order) }],
});
const { sessionId } = await client.sessions.create({ agentId });
await client.messages.create(sessionId, { role: 'user', content: 'Where is order 7?' });

const ctx = ctxflowMastra({ client, sessionId });
const agent = new Agent({
  id: 'support',
  name: 'support',
  instructions: 'Replaced by the ctxflow system prefix at every model call.',
  model: { id: 'openai/gpt-5-mini', url: provider.baseURL, apiKey: 'stand-in', api: 'responses' },
  tools: {
    lookup_order: createTool({
      id: 'lookup_order',
      description: 'Find an order',
      inputSchema: order,
      execute: async (input) => `order ${input.id}: shipped Monday`,
    }),
  },
  inputProcessors: [ctx.processor], // runs the ctxflow step, sends its request
  outputProcessors: [ctx.processor], // records the last turn when the run ends
});
const result = await agent.generate('Where is order 7?', { maxSteps: 10 });

const roles = (await client.messages.list(sessionId)).map((m) => m.role);
console.log(JSON.stringify({ output: result.text, requests: provider.requests.length, roles }));
await provider.close();
