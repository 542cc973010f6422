import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runWalkthrough, walkthroughBlock } from '../support/walkthrough.ts';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

let server: ChildProcess | undefined;
let base = '';

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  server = spawn(process.execPath, ['services/embedded/src/main.ts'], {
    env: {
      ...process.env,
      CTXFLOW_PORT: String(port),
      CTXFLOW_FEED_SECRET_GENERIC: 'demo-secret',
      CTXFLOW_LOG_LEVEL: 'warn',
    },
    stdio: 'ignore',
  });
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('npm start did not answer /healthz');
}, 60_000);

afterAll(() => {
  server?.kill('SIGTERM');
});

async function runOnce(): Promise<{ text: string; values: Map<string, string> }> {
  const run = await runWalkthrough(base);
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  return run;
}

describe('walkthrough (docs/walkthrough.md)', () => {
  it('npm start, then the walkthrough prints exactly the output shown, twice on one server, with new ids each run', async () => {
    const shown = walkthroughBlock('walkthrough-output').trim();
    const first = await runOnce();
    expect(first.text).toBe(shown);
    const second = await runOnce();
    expect(second.text).toBe(shown);
    expect([...first.values.keys()].sort()).toEqual(['event', 'session']);
    for (const [name, value] of first.values) expect(second.values.get(name), name).not.toBe(value);
  });
});
