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
 * Exactly once: every delivery once in each follower's batch stream, in order
 * per ticket; every step request committed once, in order per session, and
 * answered with its one step; every app item once in its session's log.
 */
import { randomInt, randomUUID } from 'node:crypto';
import { TOPICS } from '@ctxflow/contracts';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { requireKafka } from '../support/services.ts';
import { ExactlyOnce } from './exactly-once.ts';
import { deliverUntilAccepted, genericBody } from './feed-load.ts';
import { cleanupsAfterAll } from './load-rig.ts';
import {
  ENTRIES,
  freePort,
  PrivateRedis,
  SESSION_TIMEOUT_MS,
  ServiceProcess,
  serviceEnv,
  sleep,
  startGroupsAtEnd,
  waitFor,
} from './processes.ts';
import { StepLoad } from './step-load.ts';
import { TicketLoad } from './ticket-load.ts';

const SECRET = 'fault-random-kills-secret';
const KILLS = 3;
const SENDERS = 4;
const TICKETS = 8;
const SESSIONS = 4;
/** Window of a kill after the previous restart (or the start of the load), in ms. */
const KILL_AFTER_MS = [500, 2_500] as const;

const envSeed = process.env.CTXFLOW_FAULT_SEED;
const SEED = envSeed !== undefined && envSeed !== '' ? Number.parseInt(envSeed, 10) >>> 0 : randomInt(2 ** 32);

/** mulberry32: a small seeded PRNG, uniform in [0, 1). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

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
  const brokers = requireKafka();
  const run = `fr-${randomUUID().slice(0, 8)}`;
  const prefix = `fault:${run}`;
  const redisServer = await PrivateRedis.start({ aof: false });
  cleanups.push(() => redisServer.stop());
  const redis = new Redis(redisServer.url);
  redis.on('error', () => {});
  cleanups.push(async () => redis.disconnect());

  const runnerGroup = `fault-runner-${run}`;
  const stepContextGroup = `fault-step-context-${run}`;
  const resultsGroup = `fault-results-${run}`;
  await startGroupsAtEnd(brokers, [
    { groupId: runnerGroup, topic: TOPICS.stepRequests },
    { groupId: stepContextGroup, topic: TOPICS.ticketUpdates },
    { groupId: resultsGroup, topic: TOPICS.stepResults },
  ]);

  const [feedPort, stepContextPort, runnerPort] = [await freePort(), await freePort(), await freePort()];
  const common = {
    KAFKA_BROKERS: brokers.join(','),
    REDIS_URL: redisServer.url,
    CTXFLOW_REDIS_PREFIX: prefix,
    KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
    CTXFLOW_LOG_LEVEL: 'error',
  };
  const feed = new ServiceProcess({
    name: 'feed-ingestor',
    entry: ENTRIES.feedIngestor,
    port: feedPort,
    env: serviceEnv({ ...common, CTXFLOW_FEED_PORT: String(feedPort), CTXFLOW_FEED_SECRET_GENERIC: SECRET }),
  });
  const stepContext = new ServiceProcess({
    name: 'step-context',
    entry: ENTRIES.stepContext,
    port: stepContextPort,
    env: serviceEnv({
      ...common,
      CTXFLOW_STEP_CONTEXT_PORT: String(stepContextPort),
      CTXFLOW_STEP_CONTEXT_GROUP: stepContextGroup,
      CTXFLOW_RUNNER_URL: `http://127.0.0.1:${runnerPort}`,
    }),
  });
  const runner = new ServiceProcess({
    name: 'session-runner',
    entry: ENTRIES.runner,
    port: runnerPort,
    env: serviceEnv({
      ...common,
      CTXFLOW_PORT: String(runnerPort),
      CTXFLOW_RUNNER_GROUP: runnerGroup,
      CTXFLOW_STEP_CONTEXT_URL: `http://127.0.0.1:${stepContextPort}/step-context`,
    }),
  });
  const services: ServiceProcess[] = [feed, stepContext, runner];
  cleanups.push(() => Promise.all(services.map((s) => s.stop())));
  await Promise.all(
    services.map(async (s) => {
      await s.start();
      step(`${s.name} up`);
    }),
  );
  step('services up');

  const checker = new ExactlyOnce(`kill -9 of each service at random points (seed=${SEED})`);
  const steps = new StepLoad({ run, runnerUrl: `http://127.0.0.1:${runnerPort}`, brokers, checker });
  cleanups.push(() => steps.close());
  await steps.listen(resultsGroup);
  const sessions = await steps.createSessions(SESSIONS);
  const tickets = new TicketLoad({ run, sessions, tickets: TICKETS, fanout: 2, redis, prefix, brokers, checker });
  cleanups.push(() => tickets.close());
  await tickets.subscribe();
  step('sessions subscribed');

  const feedUrl = `http://127.0.0.1:${feedPort}/feeds/generic`;
  let killing = true;
  let delivered = 0;
  let attempts = 0;
  // Each sender owns some tickets and sends their updates one at a time: order per ticket is its sending order.
  const sender = async (s: number) => {
    const own = tickets.tickets.filter((_, j) => j % SENDERS === s);
    const versions = new Map<string, number>();
    for (let i = 0; killing || i < 10; i++) {
      const ticket = own[i % own.length]!;
      const version = (versions.get(ticket) ?? 0) + 1;
      versions.set(ticket, version);
      const eventId = `${run}-w${s}-u${i}`;
      for (const session of tickets.followers.get(ticket)!) checker.sent(`${session}|${ticket}`, `generic:${eventId}`);
      const result = await deliverUntilAccepted(feedUrl, SECRET, genericBody(eventId, ticket, { version }), {
        timeoutMs: 45_000,
      });
      delivered += 1;
      attempts += result.attempts;
      await sleep(60);
    }
  };
  const stepping = async () => {
    for (let rounds = 0; killing || rounds < 10; rounds++) {
      await steps.round();
      await sleep(100);
    }
  };
  const started = Date.now();
  const load = Promise.all([...Array.from({ length: SENDERS }, (_, s) => sender(s)), stepping()]);
  // A failing load must not leave the kill loop waiting; it is awaited (and thrown) below.
  load.catch(() => {});

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
  await load;
  step(`load done: ${delivered} deliveries, ${steps.requested.length} step requests`);
  process.stdout.write(`[random-kills] seed=${SEED}: kills ${kills.join('; ')}\n`);

  const entries = delivered * 2; // fan-out 2: one entry per delivery and follower
  await waitFor(
    'every delivery in its followers’ batch streams',
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
