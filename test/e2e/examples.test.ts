import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
let embedded: EmbeddedApp;
let url = '';

beforeAll(async () => {
  embedded = await buildEmbeddedApp({
    config: { apiKeys: new Map([['example-key', 'tenant-examples']]), secrets: {} },
  });
  url = await embedded.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => embedded.close());

/** Runs an example as a user would (Node, the package's source condition) against the app; its last line, parsed. */
async function example(file: string): Promise<unknown> {
  const { stdout } = await run(process.execPath, ['--conditions=ctxflow-source', `examples/${file}`], {
    env: { ...process.env, CTXFLOW_URL: url, CTXFLOW_API_KEY: 'example-key' },
  });
  return JSON.parse(stdout.trim().split('\n').at(-1)!);
}

describe('examples/', () => {
  it('every example is under 60 lines', () => {
    for (const file of readdirSync('examples').filter((f) => f.endsWith('.ts'))) {
      expect(readFileSync(`examples/${file}`, 'utf8').trimEnd().split('\n').length, file).toBeLessThan(60);
    }
  });

  it('ai-sdk.ts: generateText with the official SDKs records a tool call, its result and the finish', async () => {
    const out = await example('ai-sdk.ts');
    // __finish__'s result is recorded by ctxflow at the next step.
    expect(out).toEqual({ steps: 2, requests: 2, roles: ['user', 'assistant', 'tool', 'assistant'] });
  });

  it('openai-agents.ts: a Runner with the input filter records the call, its result and the answer', async () => {
    const out = await example('openai-agents.ts');
    expect(out).toEqual({
      output: 'Order 7 shipped on Monday.',
      requests: 2,
      roles: ['user', 'assistant', 'tool', 'assistant'],
    });
  });

  it('langchain.ts: createAgent with the ctxflow middleware records the call, its result and the finish', async () => {
    const out = await example('langchain.ts');
    // The run ends at __finish__ (its result, `Finished.`, is recorded by ctxflow at the next step).
    expect(out).toEqual({ last: 'Finished.', requests: 2, roles: ['user', 'assistant', 'tool', 'assistant'] });
  });

  it('mastra.ts: an Agent with the ctxflow processor records the call, its result and the answer', async () => {
    const out = await example('mastra.ts');
    expect(out).toEqual({
      output: 'Order 7 shipped on Monday.',
      requests: 2,
      roles: ['user', 'assistant', 'tool', 'assistant'],
    });
  });

  it('loop.ts: runLoop with openai.responses.create runs the tool and ends at __finish__', async () => {
    const out = await example('loop.ts');
    expect(out).toEqual({
      result: 'Order 7 shipped on Monday.',
      steps: 2,
      requests: 2,
      roles: ['user', 'assistant', 'tool', 'assistant'],
    });
  });

  it('anthropic.ts: runLoop with anthropic.messages.create runs the tool and ends at __finish__', async () => {
    const out = await example('anthropic.ts');
    expect(out).toEqual({
      result: 'Order 7 shipped on Monday.',
      steps: 2,
      requests: 2,
      roles: ['user', 'assistant', 'tool', 'assistant'],
    });
  });

  it('claude-agent.ts: query with the ctxflow turns answers the question, then the notice as the next turn', async () => {
    const out = await example('claude-agent.ts');
    // The system prefix and the question (2 messages), then the notice (3): the cursor after the last turn taken.
    expect(out).toEqual({
      results: ['Order 7 shipped on Monday.', 'Sorry to hear the parcel arrived damaged.'],
      cursor: 3,
      requests: 2,
      notice: true,
    });
  });
});
