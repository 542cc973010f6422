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

describe('examples/', () => {
  it('every example is under 60 lines', () => {
    for (const file of readdirSync('examples').filter((f) => f.endsWith('.ts'))) {
      expect(readFileSync(`examples/${file}`, 'utf8').trimEnd().split('\n').length, file).toBeLessThan(60);
    }
  });

  it('ai-sdk.ts: generateText with the official SDKs records a tool call, its result and the finish', async () => {
    const { stdout } = await run(process.execPath, ['--conditions=ctxflow-source', 'examples/ai-sdk.ts'], {
      env: { ...process.env, CTXFLOW_URL: url, CTXFLOW_API_KEY: 'example-key' },
    });
    const out = JSON.parse(stdout.trim().split('\n').at(-1)!);
    // __finish__'s result is recorded by ctxflow at the next step.
    expect(out).toEqual({ steps: 2, requests: 2, roles: ['user', 'assistant', 'tool', 'assistant'] });
  });
});
