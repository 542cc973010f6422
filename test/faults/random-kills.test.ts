/**
 * Fault: kill -9 of each service at random points. The whole stack runs as
 * child processes (feed-ingestor, step-context, session-runner) on the shared
 * Kafka and a private Redis; load goes through all three at once: signed
 * webhooks through the feed-ingestor (each sender retries a delivery on 503 or
 * a connection error until 202), sessions subscribed to the webhooks' tickets,
 * app items over HTTP and step requests over Kafka to the runner. Three times
 * per run a service drawn from a seeded PRNG is killed (-9) at a moment drawn
 * from it too, and restarted. The seed comes from CTXFLOW_FAULT_SEED (or is
 * random) and is printed at the start and in any failure.
 *
 * Exactly once: every delivery once in each follower's feed stream, in order
 * per ticket; every step request committed once, in order per session, and
 * answered with its one step; every app item once in its session's log.
 */
import { describe, expect, it } from 'vitest';
import { WebhookSenders } from './feed-load.ts';
import { cleanupsAfterAll, privateRedis, roundsUntilStopped, startLoadRig } from './load-rig.ts';
import { faultSeed, feedIngestor, prng, type ServiceProcess, sleep, waitFor } from './processes.ts';

const SECRET = 'fault-random-kills-secret';
const KILLS = 3;
const SENDERS = 4;
const TICKETS = 8;
const SESSIONS = 4;
/** Window of a kill after the previous restart (or the start of the load), in ms. */
const KILL_AFTER_MS = [500, 2_500] as const;

const SEED = faultSeed();

describe('fault: kill -9 of each service at random points', () => {
  const cleanups = cleanupsAfterAll();

  // About 75 s on an idle machine; a loaded one starts each Node service far slower (20-35 s each seen).
  it(`seed=${SEED}: three seeded kill -9 and restarts across the stack; every input lands once, in order`, async () => {
    process.stdout.write(`[random-kills] seed=${SEED}\n`);
    try {
      await scenario(cleanups);
    } catch (err) {
      if (err instanceof Error) err.message = `seed=${SEED}: ${err.message}`;
      throw err;
    }
  }, 150_000);
});

async function scenario(cleanups: (() => Promise<unknown>)[]): Promise<void> {
  const t0 = Date.now();
  const step = (what: string) => process.stdout.write(`[random-kills] +${Date.now() - t0} ms ${what}\n`);
  const random = prng(SEED);
  const between = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
  const { server: redisServer, redis } = await privateRedis(cleanups, { aof: false });
  const { brokers, run, prefix, checker, runner, stepContext, steps, tickets } = await startLoadRig({
    tag: 'fr',
    label: `kill -9 of each service at random points (seed=${SEED})`,
    cleanups,
    redisUrl: redisServer.url,
    redis,
    sessions: SESSIONS,
    tickets: TICKETS,
  });
  step('runner and step-context up, sessions subscribed');
  const { feed, feedUrl } = await feedIngestor({
    common: {
      KAFKA_BROKERS: brokers.join(','),
      REDIS_URL: redisServer.url,
      CTXFLOW_REDIS_PREFIX: prefix,
      CTXFLOW_LOG_LEVEL: 'error',
    },
    secret: SECRET,
  });
  cleanups.push(() => feed.stop());
  await feed.start();
  step('feed-ingestor up');
  const services: ServiceProcess[] = [feed, stepContext, runner];

  let killing = true;
  const senders = new WebhookSenders({
    run,
    feedUrl,
    secret: SECRET,
    tickets: tickets.tickets,
    followers: tickets.followers,
    checker,
    senders: SENDERS,
    pauseMs: 60,
    timeoutMs: 45_000,
  });
  const started = Date.now();
  const sending = senders.send((i) => killing || i < 10);
  const stepping = roundsUntilStopped(steps, 100, 10);
  // A failing load must not leave the kill loop waiting; it is awaited (and thrown) below.
  sending.catch(() => {});

  const kills: string[] = [];
  try {
    for (let k = 0; k < KILLS; k++) {
      const victim = services[Math.floor(random() * services.length)]!;
      const afterMs = between(...KILL_AFTER_MS);
      await sleep(afterMs);
      step(`kill -9 ${victim.name}`);
      await victim.kill9();
      const at = Date.now() - started;
      checker.fault(`kill -9 ${victim.name} at ${at} ms`);
      const restart = Date.now();
      await victim.start();
      step(`${victim.name} restarted`);
      kills.push(`${victim.name} at ${at} ms (down ${Date.now() - restart} ms)`);
    }
  } finally {
    killing = false;
  }
  await sending;
  await stepping.stop();
  const { accepted: delivered, attempts } = senders;
  step(`load done: ${delivered} deliveries, ${steps.requested.length} step requests`);
  process.stdout.write(`[random-kills] seed=${SEED}: kills ${kills.join('; ')}\n`);

  const entries = delivered * 2; // fan-out 2: one entry per delivery and follower
  await waitFor(
    'every delivery in its followers’ feed streams',
    async () => (await tickets.landedEntries()) >= entries,
    40_000,
    100,
  );
  step('entries landed');
  await steps.waitForResults(40_000);
  step('results in');
  // Anything doubled would arrive late: give a redelivery time to show.
  await sleep(1_500);

  const landed = await steps.landed();
  const all = new Map([...(await tickets.landed()), ...landed.streams]);
  const report = checker.check(all);
  const results = steps.checkResults(landed.stepOf);
  process.stdout.write(
    `[random-kills] seed=${SEED}: ${report.faults} faults injected, ${report.inputs} inputs checked ` +
      `(${delivered} deliveries in ${attempts} attempts, ${steps.requested.length} step requests, ` +
      `${results.repeated} repeated answer(s)); ${Date.now() - started} ms\n`,
  );
  expect(results.problems.slice(0, 10)).toEqual([]);
  expect(landed.queued).toBe(0); // every item was delivered by some step
  expect(report.faults).toBe(KILLS);
  expect(await tickets.landedEntries()).toBe(entries);
  expect(report.inputs).toBe(entries + steps.requested.length * 2);
}
