// A plain agent loop on ctxflow's neutral request with runLoop. `callModel` is where a model client goes
// (openai, @anthropic-ai/sdk, a local model); here a scripted local stand-in answers.
// Run: `npm start`, then `node --conditions=ctxflow-source examples/loop.ts` (CTXFLOW_URL, CTXFLOW_API_KEY).
import { CtxflowClient, type ModelRequest } from '@ctxflow/client';
import { type ModelTurn, runLoop } from '@ctxflow/client/loop';

const client = new CtxflowClient({
  baseURL: process.env.CTXFLOW_URL ?? 'http://127.0.0.1:8080',
  apiKey: process.env.CTXFLOW_API_KEY,
});
const { agentId } = await client.agents.create({
  context: 'You are a support agent.',
  tools: [{ name: 'lookup_order', parameters: { type: 'object', properties: { id: { type: 'string' } } } }],
});
const { sessionId } = await client.sessions.create({ agentId });

/** The stand-in model: looks the order up, then finishes with what the tool said. */
async function callModel(request: ModelRequest): Promise<ModelTurn> {
  const result = request.messages.findLast((m) => m.role === 'tool');
  if (!result) {
    return { content: '', toolCalls: [{ callId: 'call_1', name: 'lookup_order', arguments: '{"id":"7"}' }] };
  }
  const args = JSON.stringify({ result: `Order 7: ${result.content}` });
  return { content: '', toolCalls: [{ callId: 'call_2', name: '__finish__', arguments: args }] };
}

const outcome = await runLoop({
  client,
  sessionId,
  userMessage: 'Where is order 7?',
  tools: { lookup_order: (args) => `shipped Monday (order ${String(args.id)})` },
  callModel,
});
const roles = (await client.messages.list(sessionId)).map((m) => m.role);
console.log(JSON.stringify({ result: outcome.result, steps: outcome.steps, roles }));
