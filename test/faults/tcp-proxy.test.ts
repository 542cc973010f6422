/**
 * Fault: the network between the services and Redis. The session-runner and
 * step-context each reach a private Redis through their own TCP proxy on
 * loopback (test/faults/tcp-proxy.ts), under ticket and step load. In turn the
 * proxies delay every chunk, black-hole the link (then reset the hung
 * connections), and serve requests but drop the answers and cut the
 * connection: the clients reconnect and resend what they never heard back
 * about, so writes that did run are sent again. Every input id still lands
 * exactly once, in order.
 */
import { describe, expect, it } from 'vitest';
import { cleanupsAfterAll, privateRedis, roundsUntilStopped, startLoadRig } from './load-rig.ts';
import { sleep, waitFor } from './processes.ts';
import { type ProxyMode, TcpProxy } from './tcp-proxy.ts';

const UPDATES = 900;
/** Each mode in turn, for `ms`, on both proxies; after a black hole or dropped answers the hung connections are reset. */
const PHASES: { mode: ProxyMode; ms: number; delayMs?: number }[] = [
  { mode: 'delay', ms: 2_500, delayMs: 150 },
  { mode: 'blackhole', ms: 2_000 },
  { mode: 'drop-responses', ms: 2_000 },
  { mode: 'delay', ms: 1_500, delayMs: 40 },
  { mode: 'drop-responses', ms: 1_500 },
  { mode: 'blackhole', ms: 1_500 },
];

describe('fault: a TCP proxy between the services and Redis that delays, black-holes and drops answers', () => {
  const cleanups = cleanupsAfterAll();

  it('every id once under each mode', async () => {
    // The test's own client is not proxied.
    const { server: redisServer, redis } = await privateRedis(cleanups, { aof: false });
    const target = { host: '127.0.0.1', port: redisServer.port };
    const proxies = [await TcpProxy.start(target), await TcpProxy.start(target)] as const;
    cleanups.push(() => Promise.all(proxies.map((p) => p.close())));
    const { checker, steps, tickets } = await startLoadRig({
      tag: 'fx',
      label: 'TCP proxy to Redis: delay, black hole, dropped answers',
      cleanups,
      redisUrl: redisServer.url,
      redis,
      sessions: 6,
      runnerEnv: { REDIS_URL: `redis://127.0.0.1:${proxies[0].port}` },
      stepContextEnv: { REDIS_URL: `redis://127.0.0.1:${proxies[1].port}` },
    });

    const started = Date.now();
    const updates = tickets.publish(UPDATES, { perChunk: 10, everyMs: 100 });
    const stepping = roundsUntilStopped(steps);

    for (const phase of PHASES) {
      await sleep(800);
      for (const proxy of proxies) proxy.setMode(phase.mode, { delayMs: phase.delayMs ?? 0 });
      await sleep(phase.ms);
      for (const proxy of proxies) {
        proxy.setMode('pass');
        // Connections that lost bytes are out of step with their server: end them, as a timeout would.
        if (phase.mode !== 'delay') proxy.reset();
      }
      checker.fault(`${phase.mode} for ${phase.ms} ms${phase.delayMs ? ` (${phase.delayMs} ms per chunk)` : ''}`);
    }
    await updates;
    await stepping.stop();

    const total = UPDATES * 2;
    await waitFor('every ticket entry', async () => (await tickets.landedEntries(redis)) >= total, 60_000, 100);
    await steps.waitForResults(60_000);
    await sleep(1_000);

    const landed = await steps.landed();
    const report = checker.check(new Map([...landed.streams, ...(await tickets.landed(redis))]));
    const results = steps.checkResults(landed.stepOf);
    process.stdout.write(
      `[exactly-once] proxies (runner, step-context): ${JSON.stringify(proxies.map((p) => p.counts))}; ` +
        `${results.repeated} repeated answer(s); ${Date.now() - started} ms\n`,
    );
    expect(report.faults).toBe(PHASES.length);
    expect(report.inputs).toBe(total + steps.requested.length * 2);
    expect(results.problems.slice(0, 10)).toEqual([]);
    expect(landed.queued).toBe(0);
    // Each mode did bite: requests were swallowed, answers dropped and connections cut (a service
    // idle during a short black-hole window swallows nothing, so the counts are summed over both).
    const bitten = (key: 'swallowedUp' | 'droppedDown' | 'cut') => proxies.reduce((n, p) => n + p.counts[key], 0);
    expect(bitten('swallowedUp')).toBeGreaterThan(0);
    expect(bitten('droppedDown')).toBeGreaterThan(0);
    expect(bitten('cut')).toBeGreaterThan(0);
  }, 120_000);
});
