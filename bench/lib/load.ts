import autocannon from 'autocannon';
import { cpuMs } from './cpu.ts';
import type { ServerProcess } from './http-server.ts';

/** One request as the load generator sends it. */
export interface LoadRequest {
  path: string;
  headers: Record<string, string>;
  body: string;
}

export interface LoadResult {
  /** 2xx answers per second over the run. */
  rps: number;
  ok: number;
  seconds: number;
  serverCpuMs: number;
  clientCpuMs: number;
  /** Non-2xx answers and connection errors: any is a failed run. */
  failed: number;
  /** CPU milliseconds per 1,000 answered requests: the server process and this (client) process. */
  serverCpuPer1k: number;
  clientCpuPer1k: number;
}

/**
 * Closed-loop load: `connections` keep-alive connections, one request in
 * flight on each (no pipelining), for `seconds`. `next()` gives each
 * request; it runs in the client, outside the server's CPU time.
 */
export async function runLoad(
  server: ServerProcess,
  next: () => LoadRequest,
  options: { seconds: number; connections: number },
): Promise<LoadResult> {
  const serverBefore = await server.cpuMs();
  const clientBefore = process.cpuUsage();
  const result = await autocannon({
    url: server.url,
    connections: options.connections,
    pipelining: 1,
    duration: options.seconds,
    requests: [
      {
        method: 'POST',
        setupRequest: (request) => {
          const r = next();
          // autocannon adds content-length to the headers object it is given: hand it a copy.
          return { ...request, path: r.path, headers: { ...r.headers }, body: r.body };
        },
      },
    ],
  });
  const clientMs = cpuMs(clientBefore);
  const serverMs = (await server.cpuMs()) - serverBefore;
  const ok = result['2xx'];
  return {
    rps: ok / result.duration,
    ok,
    seconds: result.duration,
    serverCpuMs: serverMs,
    clientCpuMs: clientMs,
    failed: result.non2xx + result.errors,
    serverCpuPer1k: (serverMs / ok) * 1000,
    clientCpuPer1k: (clientMs / ok) * 1000,
  };
}

/** Several runs of one route as one: requests over total time, CPU over total requests. */
export function combine(runs: readonly LoadResult[]): LoadResult {
  const ok = runs.reduce((n, r) => n + r.ok, 0);
  const seconds = runs.reduce((n, r) => n + r.seconds, 0);
  const serverCpuMs = runs.reduce((n, r) => n + r.serverCpuMs, 0);
  const clientCpuMs = runs.reduce((n, r) => n + r.clientCpuMs, 0);
  return {
    rps: ok / seconds,
    ok,
    seconds,
    serverCpuMs,
    clientCpuMs,
    failed: runs.reduce((n, r) => n + r.failed, 0),
    serverCpuPer1k: (serverCpuMs / ok) * 1000,
    clientCpuPer1k: (clientCpuMs / ok) * 1000,
  };
}
