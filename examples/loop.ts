// A plain agent loop with the official openai client: ctxflow's step in the Responses API format is
// spread into `openai.responses.create` as it is; runLoop gates and records each turn.
// Run: `npm start`, then `node --conditions=ctxflow-source examples/loop.ts` (CTXFLOW_URL, CTXFLOW_API_KEY).
import { CtxflowClient } from '@ctxflow/client';
import { runLoop } from '@ctxflow/client/loop';
import OpenAI from 'openai';
import { startStandIn } from './support/stand-in-openai.ts';

const provider = await startStandIn([
  { calls: [{ name: 'lookup_order', arguments: { id: '7' } }] },
  { calls: [{ name: '__finish__', arguments: { result: 'Order 7 shipped on Monday.' } }] },
]);
const openai = new OpenAI({ baseURL: provider.baseURL, apiKey: 'stand-in' });
const client = new CtxflowClient({
  baseURL: process.env.CTXFLOW_URL ?? 'http://127.0.0.1:8080',
  apiKey: process.env.CTXFLOW_API_KEY,
});
const { agentId } = await client.agents.create({
  context: 'You are a support agent.',
  tools: [{ name: 'lookup_order', parameters: { type: 'object', properties: { id: { type: 'string' } } } }],
});
const { sessionId } = await client.sessions.create({ agentId });

const outcome = await runLoop({
  client,
  sessionId,
  format: 'openai-responses',
  userMessage: 'Where is order 7?',
  tools: { lookup_order: (args) => `order ${String(args.id)}: shipped Monday` },
  callModel: (request) => openai.responses.create({ model: 'gpt-5-mini', ...request }),
});
const roles = (await client.messages.list(sessionId)).map((m) => m.role);
console.log(
  JSON.stringify({ result: outcome.result, steps: outcome.steps, requests: provider.requests.length, roles }),
);
await provider.close();
