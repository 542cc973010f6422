/**
 * Closing the HTTP side of a service is bounded. `closeHttp` destroys the
 * connections still open after its deadline (a request that never answers
 * would otherwise hold `app.close()` forever), and every service reads its
 * grace period from `CTXFLOW_SHUTDOWN_GRACE_MS`.
 */
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { loadEmbeddedConfig } from '@ctxflow/embedded';
import { loadFeedConfig } from '@ctxflow/feed-ingestor';
import { type ConfigError, closeHttp, createServer, DEFAULT_SHUTDOWN_GRACE_MS } from '@ctxflow/service-kit';
import { loadRunnerConfig } from '@ctxflow/session-runner';
import { loadStepContextConfig } from '@ctxflow/step-context';
import { describe, expect, it } from 'vitest';

describe('bounded HTTP close', () => {
  it('closeHttp destroys a connection whose request never answers once forceAfterMs passed', async () => {
    const app = createServer();
    let arrived: () => void = () => {};
    const inHandler = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    app.get('/never', (_request, _reply) => {
      arrived();
      return new Promise(() => {}); // never answers
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const port = (app.server.address() as { port: number }).port;
    const outcome = new Promise<string>((resolve) => {
      const req = request({ host: '127.0.0.1', port, path: '/never' }, () => resolve('answered'));
      req.on('error', (err) => resolve(`error: ${(err as NodeJS.ErrnoException).code}`));
      req.end();
    });
    await inHandler;

    const closed = closeHttp(app, 300).then(() => 'closed');
    let timer: NodeJS.Timeout | undefined;
    const result = await Promise.race([
      closed,
      new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve('still closing'), 10_000);
      }),
    ]);
    clearTimeout(timer);
    if (result !== 'closed') app.server.closeAllConnections();
    expect(result).toBe('closed');
    expect(await outcome).toBe('error: ECONNRESET');
  });

  it('handleShutdown exits 1 with the pending step named when its steps outlast the grace', async () => {
    const lifecycle = fileURLToPath(new URL('../src/lifecycle.ts', import.meta.url));
    const script = `
      import { handleShutdown } from ${JSON.stringify(lifecycle)};
      const log = { info: (f, m) => console.log(JSON.stringify({ ...f, msg: m })), error: (f, m) => console.log(JSON.stringify({ ...f, msg: m })) };
      handleShutdown('probe', log, () => [
        { name: 'quick', run: async () => {} },
        { name: 'stuck', run: () => new Promise(() => {}) },
      ], { graceMs: 300 });
      const alive = setInterval(() => {}, 1000);
      process.on('SIGTERM', () => clearInterval(alive));
      console.log(JSON.stringify({ msg: 'ready' }));
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
    });
    const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    while (!out.includes('"ready"')) {
      if (child.exitCode !== null) throw new Error(out);
      await new Promise((r) => setTimeout(r, 20));
    }
    child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([
      exit,
      new Promise<'running'>((resolve) => {
        timer = setTimeout(() => resolve('running'), 10_000);
      }),
    ]);
    clearTimeout(timer);
    if (code === 'running') child.kill('SIGKILL');
    expect(code, out).toBe(1);
    const lines = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.find((l) => l.msg === 'probe: shutdown grace elapsed')).toMatchObject({ step: 'stuck', graceMs: 300 });
  });

  it('every service parses CTXFLOW_SHUTDOWN_GRACE_MS (default 30000 ms) and names it when invalid', () => {
    const loaders = [loadEmbeddedConfig, loadRunnerConfig, loadStepContextConfig, loadFeedConfig];
    for (const load of loaders) {
      expect(load({}).shutdownGraceMs).toBe(DEFAULT_SHUTDOWN_GRACE_MS);
      expect(DEFAULT_SHUTDOWN_GRACE_MS).toBe(30_000);
      expect(load({ CTXFLOW_SHUTDOWN_GRACE_MS: '2500' }).shutdownGraceMs).toBe(2_500);
      for (const bad of ['soon', '-1', '50', '600001']) {
        let problems: string[] = [];
        try {
          load({ CTXFLOW_SHUTDOWN_GRACE_MS: bad });
        } catch (err) {
          problems = (err as ConfigError).problems;
        }
        expect(problems.length, `${bad}`).toBe(1);
        expect(problems[0]).toMatch(/^CTXFLOW_SHUTDOWN_GRACE_MS: /);
      }
    }
  });
});
