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
import { randomUUID } from 'node:crypto';
import { TOPICS } from '@ctxflow/contracts';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { requireKafka } from '../support/services.ts';
import { ExactlyOnce } from './exactly-once.ts';
import {
  PrivateRedis,
  runnerAndStepContext,
  SESSION_TIMEOUT_MS,
  sleep,
  startGroupsAtEnd,
  stopAll,
  waitFor,
} from './processes.ts';
import { StepLoad } from './step-load.ts';
import { TicketLoad } from './ticket-load.ts';

const UPDATES = 1_000;
const RESTARTS = 2;

describe('fault: a Redis restart under load', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    await stopAll();
  });

  it('kill -9 and restart of an AOF-always Redis twice, then SCRIPT FLUSH, under ticket and step load: scripts recovered, every id once', async () => {
    const brokers = requireKafka();
    const run = `f4-${randomUUID().slice(0, 8)}`;
    const prefix = `fault:${run}`;
    const runnerGroup = `fault-runner-${run}`;
    const stepContextGroup = `fault-step-context-${run}`;
    const resultsGroup = `fault-results-${run}`;
    const redisServer = await PrivateRedis.start({ aof: true });
    cleanups.push(() => redisServer.stop());
    const redis = new Redis(redisServer.url);
    redis.on('error', () => {}); // down on purpose; commands wait for the reconnect
    cleanups.push(async () => redis.disconnect());

    await startGroupsAtEnd(brokers, [
      { groupId: runnerGroup, topic: TOPICS.stepRequests },
      { groupId: stepContextGroup, topic: TOPICS.ticketUpdates },
      { groupId: resultsGroup, topic: TOPICS.stepResults },
    ]);
    const common = {
      KAFKA_BROKERS: brokers.join(','),
      REDIS_URL: redisServer.url,
      CTXFLOW_REDIS_PREFIX: prefix,
      KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
      CTXFLOW_LOG_LEVEL: 'error',
    };
    const { runner, stepContext, runnerPort } = await runnerAndStepContext({
      common,
      runnerGroup,
      stepContextGroup,
    });
    await Promise.all([runner.start(), stepContext.start()]);

    const checker = new ExactlyOnce('Redis restart under load');
    const steps = new StepLoad({ run, runnerUrl: `http://127.0.0.1:${runnerPort}`, brokers, checker });
    cleanups.push(() => steps.close());
    await steps.listen(resultsGroup);
    const sessions = await steps.createSessions(6);
    const tickets = new TicketLoad({ run, sessions, tickets: 12, fanout: 2, redis, prefix, brokers, checker });
    cleanups.push(() => tickets.close());
    await tickets.subscribe();

    const started = Date.now();
    let loading = true;
    const updates = tickets.publish(UPDATES, { perChunk: 10, everyMs: 100 }); // about 10 s
    const stepping = (async () => {
      while (loading) {
        await steps.round();
        await sleep(100);
      }
    })();

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
    loading = false;
    await stepping;

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
