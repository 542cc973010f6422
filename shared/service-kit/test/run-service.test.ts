/**
 * runService's lifecycle in a child process: the shutdown steps run in order
 * (HTTP, the service's own, telemetry last) on SIGTERM and exit 0; an uncaught
 * exception runs the same shutdown and exits 1; a start that throws is logged
 * and exits 1 after telemetry flushed; a configuration refusal exits 2.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const RUN_SERVICE = fileURLToPath(new URL('../src/run-service.ts', import.meta.url));
const SERVER = fileURLToPath(new URL('../src/server.ts', import.meta.url));
const CONFIG = fileURLToPath(new URL('../src/config.ts', import.meta.url));

/** A service whose steps print their names; `trigger` is what the child does once listening. */
function script(startBody: string, trigger: string): string {
  return `
    import { runService } from ${JSON.stringify(RUN_SERVICE)};
    import { createServer } from ${JSON.stringify(SERVER)};
    import { ConfigError } from ${JSON.stringify(CONFIG)};
    const step = (name) => ({ name, run: async () => { console.log(JSON.stringify({ step: name })); } });
    await runService({
      name: 'probe',
      loadConfig: (env) => {
        if (env.PROBE_BAD) throw new ConfigError(['PROBE_BAD: refused']);
        return { host: '127.0.0.1', port: 0, logLevel: 'info', shutdownGraceMs: 5000 };
      },
      startTelemetry: () => ({ metricsText: async () => '', shutdown: async () => console.log(JSON.stringify({ step: 'telemetry' })) }),
      async start() {
        ${startBody}
        const app = createServer();
        app.addHook('onClose', async () => console.log(JSON.stringify({ step: 'http' })));
        return { app, close: [step('consumer'), step('publisher')] };
      },
    });
    ${trigger}
  `;
}

async function run(source: string, env: Record<string, string> = {}, signal?: NodeJS.Signals) {
  const file = join(mkdtempSync(join(tmpdir(), 'ctxflow-run-service-')), 'service.mjs');
  writeFileSync(file, source);
  const child = spawn(process.execPath, [file], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '', ...env },
  });
  let out = '';
  let err = '';
  let signalled = false;
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8');
    if (signal && !signalled && out.includes('probe: listening')) {
      signalled = true;
      child.kill(signal);
    }
  });
  child.stderr.on('data', (chunk: Buffer) => {
    err += chunk.toString('utf8');
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  const lines = out
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { code, lines, steps: lines.filter((l) => l.step).map((l) => l.step), err };
}

describe('runService', () => {
  it('SIGTERM: http, the service steps in order, telemetry last, exit 0', async () => {
    const { code, steps, lines } = await run(script('', ''), {}, 'SIGTERM');
    expect(code).toBe(0);
    expect(steps).toEqual(['http', 'consumer', 'publisher', 'telemetry']);
    expect(lines.find((l) => l.msg === 'probe: stopped')).toMatchObject({ signal: 'SIGTERM', failed: false });
  });

  it('an uncaught exception runs the same shutdown and exits 1', async () => {
    const trigger = "setTimeout(() => { throw new Error('boom'); }, 10);";
    const { code, steps, lines } = await run(script('', trigger));
    expect(code).toBe(1);
    expect(steps).toEqual(['http', 'consumer', 'publisher', 'telemetry']);
    expect(lines.find((l) => l.msg === 'probe: uncaughtException')).toMatchObject({ err: { message: 'boom' } });
    expect(lines.find((l) => l.msg === 'probe: stopped')).toMatchObject({ failed: true });
  });

  it('a start that throws is logged, telemetry flushes, exit 1', async () => {
    const { code, steps, lines } = await run(script("throw new Error('no broker');", ''));
    expect(code).toBe(1);
    expect(steps).toEqual(['telemetry']);
    expect(lines.find((l) => l.msg === 'probe: cannot start')).toMatchObject({ err: { message: 'no broker' } });
  });

  it('a configuration refusal goes to stderr and exits 2, nothing started', async () => {
    const { code, steps, err } = await run(script('', ''), { PROBE_BAD: '1' });
    expect(code).toBe(2);
    expect(steps).toEqual([]);
    expect(err).toBe('probe: invalid configuration:\n  - PROBE_BAD: refused\n');
  });
});
