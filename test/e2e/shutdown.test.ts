/**
 * SIGTERM with a `GET /sessions/:id/stream` follower and an idle
 * keep-alive socket open. The process ends the stream with a final `shutdown`
 * event, closes both connections and exits 0 within its grace period
 * (`CTXFLOW_SHUTDOWN_GRACE_MS`), as `npm start` (the embedded app) and as the
 * stack's session-runner (here on its in-memory store, no Kafka).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, serviceEnv, waitFor } from '../faults/processes.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const GRACE_MS = 4_000;
/** Slack over the grace for process exit and a loaded 2-core machine; the bound itself is the property. */
const MARGIN_MS = 3_000;

const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** A raw HTTP/1.1 connection: everything received, and when the server closed it. */
class RawClient {
  readonly socket: Socket;
  text = '';
  readonly closed: Promise<void>;
  #waiters: (() => void)[] = [];

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.setEncoding('utf8');
    this.socket.on('data', (chunk: string) => {
      this.text += chunk;
      for (const wake of this.#waiters.splice(0)) wake();
    });
    this.socket.on('error', () => {});
    this.closed = new Promise((resolve) => this.socket.once('close', () => resolve()));
  }

  send(request: string): void {
    this.socket.write(request);
  }

  async until(pattern: RegExp | string, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const has = () => (typeof pattern === 'string' ? this.text.includes(pattern) : pattern.test(this.text));
    while (!has()) {
      if (Date.now() > deadline) throw new Error(`no ${pattern} within ${timeoutMs} ms; got ${this.text.slice(-500)}`);
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        setTimeout(resolve, 100);
      });
    }
  }
}

async function call(port: number, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const answer = await response.json();
  expect(response.status, JSON.stringify(answer)).toBeLessThan(300);
  return answer;
}

const SERVICES = [
  { name: 'embedded app (npm start)', entry: 'services/embedded/src/main.ts' },
  { name: 'session-runner (stack service, in-memory store)', entry: 'services/session-runner/src/main.ts' },
];

describe('SIGTERM while a stream follower is connected', () => {
  for (const service of SERVICES) {
    it(`${service.name} ends the stream with a shutdown event, closes idle keep-alive sockets and exits 0 within CTXFLOW_SHUTDOWN_GRACE_MS`, async () => {
      const port = await freePort();
      const child = spawn(process.execPath, [`${ROOT}/${service.entry}`], {
        cwd: ROOT,
        env: serviceEnv({
          CTXFLOW_PORT: String(port),
          CTXFLOW_SHUTDOWN_GRACE_MS: String(GRACE_MS),
          CTXFLOW_LOG_LEVEL: 'info',
        }),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      let output = '';
      child.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString('utf8');
      });
      child.stderr!.on('data', (chunk: Buffer) => {
        output += chunk.toString('utf8');
      });
      const exited = new Promise<{ code: number | null; signal: string | null; at: number }>((resolve) =>
        child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })),
      );
      await waitFor(
        `${service.name} to listen`,
        async () => {
          if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}: ${output}`);
          return (await fetch(`http://127.0.0.1:${port}/healthz`)).ok;
        },
        30_000,
        100,
      );

      const { agentId } = await call(port, 'POST', '/agents', {});
      const { sessionId } = await call(port, 'POST', '/sessions', { agentId });

      // A follower on the stream, which sees a live message.
      const follower = new RawClient(port);
      follower.send(`GET /sessions/${sessionId}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
      await follower.until('text/event-stream');
      await call(port, 'POST', `/sessions/${sessionId}/messages`, { role: 'user', content: 'hello before shutdown' });
      await follower.until('hello before shutdown');

      // An idle keep-alive socket: one answered request, then nothing.
      const idle = new RawClient(port);
      idle.send('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n');
      await idle.until('{"status":"ok"}');

      const signalledAt = Date.now();
      child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([
        Promise.all([exited, follower.closed, idle.closed]).then(([exit]) => exit),
        new Promise<'still running'>((resolve) => {
          timer = setTimeout(() => resolve('still running'), GRACE_MS + MARGIN_MS);
        }),
      ]);
      clearTimeout(timer);
      if (outcome === 'still running') child.kill('SIGKILL');

      expect(outcome, output.slice(-2000)).not.toBe('still running');
      if (outcome === 'still running') return;
      process.stdout.write(
        `[shutdown] ${service.name}: SIGTERM to exit ${outcome.at - signalledAt} ms (grace ${GRACE_MS})\n`,
      );
      expect({ code: outcome.code, signal: outcome.signal }).toEqual({ code: 0, signal: null });
      expect(outcome.at - signalledAt).toBeLessThan(GRACE_MS + MARGIN_MS);
      // The follower's last event is the shutdown event, then the chunked response ends.
      const events = follower.text.split('\r\n\r\n').slice(1).join('\r\n\r\n');
      expect(events).toContain('event: shutdown\ndata: {"type":"shutdown"}\n\n');
      expect(events.lastIndexOf('event: ')).toBe(events.indexOf('event: shutdown'));
      expect(follower.text.endsWith('0\r\n\r\n')).toBe(true);
    }, 60_000);
  }
});
