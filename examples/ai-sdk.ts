// A Vercel AI SDK agent loop on ctxflow, against a local stand-in for OpenAI's Responses API.
// Run: `npm start`, then `node --conditions=ctxflow-source examples/ai-sdk.ts` (CTXFLOW_URL, CTXFLOW_API_KEY).
import { createOpenAI } from '@ai-sdk/openai';
import { CtxflowClient } from '@ctxflow/client';
import { ctxflowAiSdk } from '@ctxflow/client/ai-sdk';
import { generateText, stepCountIs, tool } from 'ai';
import { z } from 'zod';
import { startStandIn } from './support/stand-in-openai.ts';

const provider = await startStandIn([
  { calls: [{ name: 'lookup_order', arguments: { id: '7' } }] },
  { calls: [{ name: '__finish__', arguments: { result: 'Order 7 shipped on Monday.' } }] },
]);
const openai = createOpenAI({ baseURL: provider.baseURL, apiKey: 'stand-in' });
const client = new CtxflowClient({
  baseURL: process.env.CTXFLOW_URL ?? 'http://127.0.0.1:8080',
  apiKey: process.env.CTXFLOW_API_KEY,
});

const order = z.object({ id: z.string() });
const tools = {
  lookup_order: tool({
    description: 'Find an order',
    inputSchema: order,
    execute: async (input) => `order ${input.id}: shipped Monday`,
  }),
  __finish__: tool({
    description: 'Call when the task is complete.',
    inputSchema: z.object({ result: z.string().optional() }),
  }),
};
const { agentId } = await client.agents.create({
  context: 'You are a support agent.',
  tools: [{ name: 'lookup_order', description: 'Find an order', parameters: z.toJSONSchema(order) }],
});
const { sessionId } = await client.sessions.create({ agentId });
await client.messages.create(sessionId, { role: 'user', content: 'Where is order 7?' });

const ctx = ctxflowAiSdk({ client, sessionId, tools });
const result = await generateText({
  model: openai('gpt-5-mini'),
  tools,
  prompt: 'Where is order 7?', // replaced by ctxflow's request at every step
  allowSystemInMessages: true, // context rows keep their place in the conversation
  prepareStep: ctx.prepareStep,
  onStepFinish: ctx.onStepFinish,
  stopWhen: [stepCountIs(10), ctx.finished],
});

const roles = (await client.messages.list(sessionId)).map((m) => m.role);
console.log(JSON.stringify({ steps: result.steps.length, requests: provider.requests.length, roles }));
await provider.close();
