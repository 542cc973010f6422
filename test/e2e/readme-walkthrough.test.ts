import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** The README's fenced block tagged `name`. */
function readmeBlock(name: string): string {
  const readme = readFileSync('README.md', 'utf8');
  const match = new RegExp(`\`\`\`[a-z]+ ${name}\\n([\\s\\S]*?)\\n\`\`\``).exec(readme);
  if (!match) throw new Error(`README has no block tagged ${name}`);
  return match[1]!;
}

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

describe('README walkthrough', () => {
  it('npm start, then the walkthrough prints exactly the output the README shows', () => {
    const run = spawnSync('bash', ['-euo', 'pipefail', '-c', readmeBlock('walkthrough')], {
      env: { ...process.env, CTXFLOW: base },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.stdout.trim()).toBe(readmeBlock('walkthrough-output').trim());
  });
});
