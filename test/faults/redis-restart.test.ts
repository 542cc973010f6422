/**
 * Fault: Redis restarts under load. The session-runner (step requests from
 * Kafka, app items over HTTP, the step-context service as its hook) and
 * step-context (ticket updates from Kafka) run on a private redis-server with
 * `--appendonly yes --appendfsync always`: every acknowledged write is on disk
 * before its reply, so a kill -9 of Redis loses nothing acknowledged, but its
 * script cache is gone. Then SCRIPT FLUSH under load, under the services' open
 * connections. The clients must recover by themselves (ioredis sends EVAL on
 * a new connection and after a NOSCRIPT answer) and every input id still lands
 * exactly once.
 */
import { describe, expect, it } from 'vitest';
import { cleanupsAfterAll, privateRedis, roundsUntilStopped, startLoadRig } from './load-rig.ts';
import { sleep, waitFor } from './processes.ts';

const UPDATES = 1_000;
const RESTARTS = 2;

describe('fault: a Redis restart under load', () => {
  const cleanups = cleanupsAfterAll();

  it('kill -9 and restart of an AOF-always Redis twice, then SCRIPT FLUSH, under ticket and step load: scripts recovered, every id once', async () => {
    const { server: redisServer, redis } = await privateRedis(cleanups, { aof: true });
    const { checker, runner, stepContext, steps, tickets } = await startLoadRig({
      tag: 'f4',
      label: 'Redis restart under load',
      cleanups,
      redisUrl: redisServer.url,
      redis,
      sessions: 6,
    });

    const started = Date.now();
    const updates = tickets.publish(UPDATES, { perChunk: 10, everyMs: 100 }); // about 10 s
    const stepping = roundsUntilStopped(steps);

    const restarts: { landedBefore: number; downMs: number }[] = [];
    for (let i = 0; i < RESTARTS; i++) {
      await sleep(2_500);
      const landedBefore = await tickets.landedEntries(redis);
      const down = Date.now();
      await redisServer.kill9();
      await sleep(500);
      await redisServer.start(); // same port and directory: the AOF is replayed, the script cache is empty
      const downMs = Date.now() - down;
      restarts.push({ landedBefore, downMs });
      checker.fault(`kill -9 and restart of Redis after ${landedBefore} entries (down ${downMs} ms)`);
      // Nothing acknowledged before the kill is gone.
      expect(await tickets.landedEntries(redis)).toBeGreaterThanOrEqual(landedBefore);
    }
    // A new connection gets every script by EVAL first (ioredis), so a restart alone never answers NOSCRIPT.
    // SCRIPT FLUSH under load empties the cache under the services' open connections: NOSCRIPT, then EVAL.
    await sleep(2_000);
    await redis.script('FLUSH');
    checker.fault('SCRIPT FLUSH under load');
    await updates;
    await stepping.stop();

    const total = UPDATES * 2;
    await waitFor('every ticket entry', async () => (await tickets.landedEntries(redis)) >= total, 60_000, 100);
    await steps.waitForResults(60_000);
    await sleep(1_000);

    const landed = await steps.landed();
    const streams = new Map([...landed.streams, ...(await tickets.landed(redis))]);
    const report = checker.check(streams);
    const results = steps.checkResults(landed.stepOf);
    // Counted since the last restart.
    const noscript = Number(/errorstat_NOSCRIPT:count=(\d+)/.exec(await redis.info('errorstats'))?.[1] ?? 0);
    const evals = Number(/cmdstat_eval:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);
    process.stdout.write(
      `[exactly-once] ${UPDATES} updates and ${steps.requested.length} step requests; restarts ${JSON.stringify(restarts)}; ` +
        `since the last restart ${evals} script(s) sent by EVAL and ${noscript} NOSCRIPT answer(s), recovered; ` +
        `${results.repeated} repeated answer(s); ` +
        `${Date.now() - started} ms\n`,
    );
    expect(report.faults).toBe(RESTARTS + 1);
    expect(report.inputs).toBe(total + steps.requested.length * 2);
    expect(results.problems.slice(0, 10)).toEqual([]);
    expect(landed.queued).toBe(0);
    // After the restart the scripts came back by EVAL; after the flush Redis refused them (NOSCRIPT)
    // and the services went on by themselves.
    expect(evals).toBeGreaterThan(0);
    expect(noscript).toBeGreaterThan(0);
    await Promise.all([runner.stop(), stepContext.stop()]);
  }, 90_000);
});
