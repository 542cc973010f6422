/**
 * S10: one tenant floods, another is not slowed. The session-runner app (a child process,
 * lib/tenant-isolation-child.ts) with CTXFLOW_RATE_LIMIT_PER_MINUTE counted in Redis; the
 * other tenant sends `GET /sessions/:id` every 25 ms (well under its own limit) and its p50
 * is measured unloaded, then while the flooding tenant sends `POST /sessions` from 10
 * autocannon connections, nearly all of them answered 429 `rate_limited`. The ratio is
 * the p50 while flooded over the p50 unloaded, per trial.
 *
 * The flood's load generator stands in for callers on other machines: it runs in its own
 * thread (autocannon's `workers`), so the other tenant's client does not wait on its event
 * loop, and with `taskset` on a machine of two cores or more the server has a core to itself
 * and this process (both clients) the others: what is measured is the server's share between
 * the two tenants, not the generator taking the server's CPU.
 */
import { type ChildProcess, execFileSync, fork } from 'node:child_process';
import { once } from 'node:events';
import { cpus } from 'node:os';
import autocannon from 'autocannon';
import { progress } from './lib/progress.ts';
import { meets, type ScenarioResult } from './lib/report.ts';
import { median, quantile, round, summarize } from './lib/stats.ts';

const KEY_A = 'bench-flooding-tenant-key-0123456789';
const KEY_B = 'bench-other-tenant-key-0123456789';
/** Over the other tenant's ~1,500 requests of a run, and used up by the flood in about a second. */
const PER_MINUTE = 2_000;
const PACE_MS = 25;

export interface TenantIsolationOptions {
  redisUrl: string;
  trials: number;
  /** Seconds the other tenant is measured, unloaded and flooded, per trial. */
  seconds: number;
}

async function start(redisUrl: string): Promise<{ child: ChildProcess; url: string }> {
  const child = fork(new URL('./lib/tenant-isolation-child.ts', import.meta.url), [], {
    env: {
      ...process.env,
      REDIS_URL: redisUrl,
      BENCH_PER_MINUTE: String(PER_MINUTE),
      BENCH_KEY_A: KEY_A,
      BENCH_KEY_B: KEY_B,
    },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`S10 server exited with ${code} before listening`)));
    child.on('message', (m: { type: string; port?: number }) => {
      if (m.type === 'listening') resolve(m.port!);
    });
  });
  return { child, url: `http://127.0.0.1:${port}` };
}

const headers = (key: string) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });

/** The other tenant's latencies over `ms`, one request every PACE_MS; any answer but 200 is an error. */
async function paced(url: string, ms: number): Promise<number[]> {
  const latencies: number[] = [];
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const started = performance.now();
    const response = await fetch(url, { headers: headers(KEY_B) });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`S10: the other tenant was answered ${response.status}`);
    latencies.push(performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, PACE_MS));
  }
  return latencies;
}

/**
 * Pins `serverPid` to CPU 0 and every thread of this process to the other CPUs, with taskset;
 * returns how to undo it (this process's affinity), or undefined where that cannot be done.
 */
function pinApart(serverPid: number): { note: string; undo(): void } | undefined {
  const count = cpus().length;
  if (count < 2) return undefined;
  try {
    const mine = execFileSync('taskset', ['-p', String(process.pid)], { encoding: 'utf8' })
      .trim()
      .split(' ')
      .at(-1)!;
    execFileSync('taskset', ['-a', '-cp', '0', String(serverPid)], { stdio: 'ignore' });
    execFileSync('taskset', ['-a', '-cp', `1-${count - 1}`, String(process.pid)], { stdio: 'ignore' });
    return {
      note: `taskset: the server on CPU 0, the clients on CPU 1-${count - 1}`,
      undo: () => execFileSync('taskset', ['-a', '-p', mine, String(process.pid)], { stdio: 'ignore' }),
    };
  } catch {
    return undefined;
  }
}

export async function runTenantIsolation(options: TenantIsolationOptions): Promise<ScenarioResult[]> {
  const { child, url } = await start(options.redisUrl);
  const pinned = pinApart(child.pid!);
  try {
    const created = await fetch(`${url}/sessions`, { method: 'POST', headers: headers(KEY_B), body: '{}' });
    const { sessionId } = (await created.json()) as { sessionId: string };
    const read = `${url}/sessions/${sessionId}`;
    await paced(read, 1_000);
    const ratios: number[] = [];
    const calm: number[] = [];
    const flooded: number[] = [];
    const floodRps: number[] = [];
    const limitedShare: number[] = [];
    for (let trial = 0; trial < options.trials; trial++) {
      const unloaded = quantile(await paced(read, options.seconds * 1000), 0.5);
      const flood = autocannon({
        url: `${url}/sessions`,
        method: 'POST',
        body: '{}',
        connections: 10,
        workers: 1,
        duration: options.seconds + 3,
        headers: headers(KEY_A),
      });
      // The flooding tenant is past its limit before the other one is measured.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const underFlood = quantile(await paced(read, options.seconds * 1000), 0.5);
      const result = await flood;
      calm.push(unloaded);
      flooded.push(underFlood);
      ratios.push(underFlood / unloaded);
      floodRps.push(result.requests.average);
      limitedShare.push(result.non2xx / Math.max(1, result.requests.total));
      progress(
        `S10 trial ${trial + 1}/${options.trials}: other tenant p50 ${unloaded.toFixed(2)} ms unloaded, ` +
          `${underFlood.toFixed(2)} ms flooded (${Math.round(result.requests.average)} req/s, ` +
          `${Math.round((100 * result.non2xx) / Math.max(1, result.requests.total))}% refused)`,
      );
    }
    const goal = { op: '<=' as const, value: 1.5 };
    const ratio = summarize(ratios);
    return [
      {
        id: 'S10',
        title: "Another tenant's latency while one tenant floods past its rate limit",
        ratioOf: "p50 of the other tenant's GET /sessions/:id while flooded / unloaded",
        goal,
        ratio,
        met: meets(goal, ratio.median),
        cpuMsPer1k: {},
        figures: {
          'p50 ms unloaded': round(median(calm), 3),
          'p50 ms flooded': round(median(flooded), 3),
          'flood req/s': Math.round(median(floodRps)),
          'flood refused share': round(median(limitedShare), 3),
        },
        notes: [
          `CTXFLOW_RATE_LIMIT_PER_MINUTE ${PER_MINUTE} on Redis; the flood: POST /sessions, 10 connections; ` +
            `the other tenant: one request every ${PACE_MS} ms, ${options.seconds} s per side per trial`,
          `the flood's generator in its own thread; ${pinned?.note ?? 'no CPU pinning (taskset missing or one core)'}`,
        ],
      },
    ];
  } finally {
    pinned?.undo();
    const exited = once(child, 'exit');
    child.send({ type: 'stop' });
    await exited;
  }
}
