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
import { type ProxyMode, TcpProxy } from './tcp-proxy.ts';
import { TicketLoad } from './ticket-load.ts';

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
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    await stopAll();
  });

  it('every id once under each mode', async () => {
    const brokers = requireKafka();
    const run = `fx-${randomUUID().slice(0, 8)}`;
    const prefix = `fault:${run}`;
    const runnerGroup = `fault-runner-${run}`;
    const stepContextGroup = `fault-step-context-${run}`;
    const resultsGroup = `fault-results-${run}`;
    const redisServer = await PrivateRedis.start({ aof: false });
    cleanups.push(() => redisServer.stop());
    const redis = new Redis(redisServer.url); // the test's own view, not proxied
    cleanups.push(async () => redis.disconnect());
    const target = { host: '127.0.0.1', port: redisServer.port };
    const proxies = [await TcpProxy.start(target), await TcpProxy.start(target)] as const;
    cleanups.push(() => Promise.all(proxies.map((p) => p.close())));

    await startGroupsAtEnd(brokers, [
      { groupId: runnerGroup, topic: TOPICS.stepRequests },
      { groupId: stepContextGroup, topic: TOPICS.ticketUpdates },
      { groupId: resultsGroup, topic: TOPICS.stepResults },
    ]);
    const common = {
      KAFKA_BROKERS: brokers.join(','),
      CTXFLOW_REDIS_PREFIX: prefix,
      KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
      CTXFLOW_LOG_LEVEL: 'error',
    };
    const { runner, stepContext, runnerPort } = await runnerAndStepContext({
      common,
      runnerGroup,
      stepContextGroup,
      runnerEnv: { REDIS_URL: `redis://127.0.0.1:${proxies[0].port}` },
      stepContextEnv: { REDIS_URL: `redis://127.0.0.1:${proxies[1].port}` },
    });
    cleanups.push(() => Promise.all([runner.stop(), stepContext.stop()]));
    await Promise.all([runner.start(), stepContext.start()]);

    const checker = new ExactlyOnce('TCP proxy to Redis: delay, black hole, dropped answers');
    const steps = new StepLoad({ run, runnerUrl: `http://127.0.0.1:${runnerPort}`, brokers, checker });
    cleanups.push(() => steps.close());
    await steps.listen(resultsGroup);
    const sessions = await steps.createSessions(6);
    const tickets = new TicketLoad({ run, sessions, tickets: 12, fanout: 2, redis, prefix, brokers, checker });
    cleanups.push(() => tickets.close());
    await tickets.subscribe();

    const started = Date.now();
    let loading = true;
    const updates = tickets.publish(UPDATES, { perChunk: 10, everyMs: 100 });
    const stepping = (async () => {
      while (loading) {
        await steps.round();
        await sleep(100);
      }
    })();

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
    loading = false;
    await stepping;

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
