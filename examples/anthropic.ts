// A plain agent loop with the official @anthropic-ai/sdk client: ctxflow's step in the Anthropic
// Messages format is spread into `anthropic.messages.create` as it is; runLoop gates and records each turn.
// Run: `npm start`, then `node --conditions=ctxflow-source examples/anthropic.ts` (CTXFLOW_URL, CTXFLOW_API_KEY).
import Anthropic from '@anthropic-ai/sdk';
import { CtxflowClient } from '@ctxflow/client';
import { runLoop } from '@ctxflow/client/loop';
import { startAnthropicStandIn } from './support/stand-in-anthropic.ts';

const provider = await startAnthropicStandIn([
  { text: 'Let me look it up.', calls: [{ name: 'lookup_order', arguments: { id: '7' } }] },
  { calls: [{ name: '__finish__', arguments: { result: 'Order 7 shipped on Monday.' } }] },
]);
const anthropic = new Anthropic({ baseURL: provider.baseURL, apiKey: 'stand-in', maxRetries: 0 });
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
  format: 'anthropic',
  userMessage: 'Where is order 7?',
  tools: { lookup_order: (args) => `order ${String(args.id)}: shipped Monday` },
  callModel: (request) => anthropic.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 1024, ...request }),
});
const roles = (await client.messages.list(sessionId)).map((m) => m.role);
console.log(
  JSON.stringify({ result: outcome.result, steps: outcome.steps, requests: provider.requests.length, roles }),
);
await provider.close();
