import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** The walkthrough's fenced block tagged `name` (docs/walkthrough.md, linked from the README). */
function walkthroughBlock(name: string): string {
  const doc = readFileSync('docs/walkthrough.md', 'utf8');
  const match = new RegExp(`\`\`\`[a-z]+ ${name}\\n([\\s\\S]*?)\\n\`\`\``).exec(doc);
  if (!match) throw new Error(`docs/walkthrough.md has no block tagged ${name}`);
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

/**
 * The shown output as a pattern, line by line: `<name>` stands for one value of the run
 * (no quote, no space), the same value wherever the name appears in that run.
 */
function normalize(template: string, actual: string): { text: string; values: Map<string, string> } {
  const values = new Map<string, string>();
  const want = template.split('\n');
  const lines = actual.split('\n').map((line, i) => {
    const shown = want[i];
    if (shown === undefined) return line;
    const names: string[] = [];
    const source = shown
      .split(/(<[a-z]+>)/)
      .map((part) => {
        const name = /^<([a-z]+)>$/.exec(part)?.[1];
        if (!name) return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
        names.push(name);
        return '([^"\\s]+)';
      })
      .join('');
    const match = new RegExp(`^${source}$`).exec(line);
    if (!match) return line;
    const bound = names.map((name, k) => [name, match[k + 1]!] as const);
    if (bound.some(([name, value]) => (values.get(name) ?? value) !== value)) return line;
    for (const [name, value] of bound) values.set(name, value);
    return shown;
  });
  return { text: lines.join('\n'), values };
}

function runWalkthrough(): { text: string; values: Map<string, string> } {
  // stdin from /dev/null: on a socket (node's default pipe) with SHLVL unset, Debian's bash
  // sources /etc/bash.bashrc as for a remote shell, and `-u` fails on its PS1.
  const run = spawnSync('bash', ['-euo', 'pipefail', '-c', walkthroughBlock('walkthrough')], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, CTXFLOW: base },
    encoding: 'utf8',
    timeout: 30_000,
  });
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  return normalize(walkthroughBlock('walkthrough-output').trim(), run.stdout.trim());
}

describe('walkthrough (docs/walkthrough.md)', () => {
  it('npm start, then the walkthrough prints exactly the output shown, twice on one server, with new ids each run', () => {
    const shown = walkthroughBlock('walkthrough-output').trim();
    const first = runWalkthrough();
    expect(first.text).toBe(shown);
    const second = runWalkthrough();
    expect(second.text).toBe(shown);
    expect([...first.values.keys()].sort()).toEqual(['event', 'session']);
    for (const [name, value] of first.values) expect(second.values.get(name), name).not.toBe(value);
  });
});
