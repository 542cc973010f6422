/**
 * The README's commands on a machine whose own `node` cannot run TypeScript (Debian's Node 20):
 * npm scripts run the Node that `npm ci` installed into node_modules/.bin (the `node` package,
 * pinned), whatever `node` comes first on PATH.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
};
const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as {
  packages: Record<string, { version?: string }>;
};

/**
 * A `node` as old as Node 20 is for this project: it runs npm itself (plain JavaScript) but
 * refuses a `.ts` entry point the way Node 20 does.
 */
let oldNodeDir = '';
let path = '';

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

let started: ChildProcess | undefined;

beforeAll(() => {
  oldNodeDir = mkdtempSync(join(tmpdir(), 'ctxflow-old-node-'));
  writeFileSync(
    join(oldNodeDir, 'node'),
    [
      '#!/bin/sh',
      'for arg in "$@"; do',
      '  case "$arg" in',
      '    *.ts) echo "TypeError [ERR_UNKNOWN_FILE_EXTENSION]: Unknown file extension \\".ts\\" for $arg" >&2; exit 1 ;;',
      '  esac',
      'done',
      `exec '${process.execPath}' "$@"`,
      '',
    ].join('\n'),
  );
  chmodSync(join(oldNodeDir, 'node'), 0o755);
  path = [oldNodeDir, process.env.PATH ?? ''].join(delimiter);
});

afterAll(async () => {
  if (started && started.exitCode === null) {
    // npm, its shell and the server are one process group: stop all three.
    const exited = new Promise((resolve) => started?.once('exit', resolve));
    process.kill(-(started.pid ?? 0), 'SIGTERM');
    await exited;
  }
  rmSync(oldNodeDir, { recursive: true, force: true });
});

describe('Node for npm scripts', () => {
  it('node: package.json pins the node package at an exact 24.x, the lockfile agrees, engines is >=22.18', () => {
    expect(pkg.devDependencies.node).toMatch(/^24\.\d+\.\d+$/);
    expect(lock.packages['node_modules/node']?.version).toBe(pkg.devDependencies.node);
    expect(pkg.engines.node).toBe('>=22.18');
  });

  it('node: with a node that cannot run .ts first on PATH, npm scripts run the pinned Node', () => {
    const seen = spawnSync('node', ['services/embedded/src/main.ts'], {
      env: { ...process.env, PATH: path },
      encoding: 'utf8',
    });
    expect(seen.stderr).toContain('ERR_UNKNOWN_FILE_EXTENSION');
    const run = spawnSync('npm', ['exec', '--offline', '-c', 'node -p process.version'], {
      env: { ...process.env, PATH: path },
      encoding: 'utf8',
    });
    expect(run.status).toBe(0);
    expect(run.stdout.trim()).toBe(`v${pkg.devDependencies.node}`);
  });

  it('node: with a node that cannot run .ts first on PATH, npm start serves /healthz', async () => {
    const port = await freePort();
    let stderr = '';
    started = spawn('npm', ['start'], {
      env: { ...process.env, PATH: path, CTXFLOW_PORT: String(port), CTXFLOW_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'pipe'],
      detached: true,
    });
    started.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    let status = 0;
    for (let i = 0; i < 300 && status !== 200 && started.exitCode === null; i++) {
      try {
        status = (await fetch(`http://127.0.0.1:${port}/healthz`)).status;
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    expect(stderr).not.toContain('ERR_UNKNOWN_FILE_EXTENSION');
    expect(status).toBe(200);
  }, 60_000);
});
