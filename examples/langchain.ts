// A LangChain v1 agent (createAgent) on ctxflow, against a local stand-in for OpenAI's Responses API.
// Run: `npm start`, then `node --conditions=ctxflow-source examples/langchain.ts` (CTXFLOW_URL, CTXFLOW_API_KEY).
import { CtxflowClient } from '@ctxflow/client';
import { ctxflowMiddleware, toolDeclarations } from '@ctxflow/client/langchain';
import { ChatOpenAI } from '@langchain/openai';
import { createAgent, tool } from 'langchain';
import { z } from 'zod';
import { startStandIn } from './support/stand-in-openai.ts';

const provider = await startStandIn([
  { calls: [{ name: 'lookup_order', arguments: { id: '7' } }] },
  { calls: [{ name: '__finish__', arguments: { result: 'Order 7 shipped on Monday.' } }] },
]);
const client = new CtxflowClient({
  baseURL: process.env.CTXFLOW_URL ?? 'http://127.0.0.1:8080',
  apiKey: process.env.CTXFLOW_API_KEY,
});
const lookup = tool(async ({ id }) => `order ${id}: shipped Monday`, {
  name: 'lookup_order',
  description: 'Find an order',
  schema: z.object({ id: z.string() }),
});
const { agentId } = await client.agents.create({
  context: 'You are a support agent.',
  tools: toolDeclarations([lookup]),
});
const { sessionId } = await client.sessions.create({ agentId });

const agent = createAgent({
  model: new ChatOpenAI({
    model: 'gpt-5-mini',
    apiKey: 'stand-in',
    configuration: { baseURL: provider.baseURL },
    useResponsesApi: true,
  }),
  tools: [lookup],
  middleware: [ctxflowMiddleware({ client, sessionId })],
});
const question = 'Where is order 7?';
await client.messages.create(sessionId, { role: 'user', content: question });
const result = await agent.invoke({ messages: [{ role: 'user', content: question }] });

const roles = (await client.messages.list(sessionId)).map((m) => m.role);
const last = result.messages.at(-1)?.text;
console.log(JSON.stringify({ last, requests: provider.requests.length, roles }));
await provider.close();
