// The Claude Agent SDK on ctxflow, "rows only": the SDK keeps its transcript and tools, ctxflow hands it
// the session's new rows as user turns. Against a local stand-in for Anthropic's Messages API.
// Run: `npm start`, then `node --conditions=ctxflow-source examples/claude-agent.ts` (CTXFLOW_URL, CTXFLOW_API_KEY).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { query } from '@anthropic-ai/claude-agent-sdk';
import { CtxflowClient } from '@ctxflow/client';
import { ctxflowTurns } from '@ctxflow/client/claude-agent';
import { startAnthropicStandIn } from './support/stand-in-anthropic.ts';

const provider = await startAnthropicStandIn([
  { text: 'Order 7 shipped on Monday.' },
  { text: 'Sorry to hear the parcel arrived damaged.' },
]);
const client = new CtxflowClient({
  baseURL: process.env.CTXFLOW_URL ?? 'http://127.0.0.1:8080',
  apiKey: process.env.CTXFLOW_API_KEY,
});
const { sessionId } = await client.sessions.create({ context: 'You are a support agent.' });
await client.messages.create(sessionId, { role: 'user', content: 'Where is order 7?' });

const stop = new AbortController();
let cursor = 0; // keep it (a database, a file) to start again from it after a crash
const prompt = ctxflowTurns({
  client,
  sessionId,
  signal: stop.signal,
  // A notice (POST /context) has no stream event: it comes at the next step, after 100 ms at the latest.
  idleStepMs: 100,
  onAcknowledge: (s) => {
    cursor = s;
  },
});
// The CLI's own home and working directory; it calls nothing but ANTHROPIC_BASE_URL.
const home = mkdtempSync(join(tmpdir(), 'claude-agent-example-'));
const env = { PATH: process.env.PATH, HOME: home, ANTHROPIC_BASE_URL: provider.baseURL, ANTHROPIC_API_KEY: 'stand-in' };
const options = {
  cwd: home,
  model: 'claude-sonnet-4-5',
  settingSources: [],
  env: { ...env, DISABLE_TELEMETRY: '1', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' },
};

const results: string[] = [];
for await (const message of query({ prompt, options })) {
  if (message.type !== 'result') continue;
  results.push(message.subtype === 'success' ? message.result : message.subtype);
  // A notice added while the agent runs reaches it as its next turn; then the input ends.
  if (results.length === 1) {
    await client.context.add({ sessionId, items: [{ kind: 'notice', content: 'The parcel arrived damaged.' }] });
  } else stop.abort();
}
const last = JSON.stringify(provider.requests.at(-1)?.messages);
console.log(JSON.stringify({ results, cursor, requests: provider.requests.length, notice: last.includes('damaged') }));
await provider.close();
rmSync(home, { recursive: true, force: true });
