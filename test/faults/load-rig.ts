/**
 * The rigs the fault tests share. startLoadRig: a session-runner and a
 * step-context process wired to each other, in fresh consumer groups that start at their
 * topics' ends, with step requests and app items over a few sessions
 * (StepLoad) and ticket updates those sessions follow (TicketLoad), all
 * checked by one ExactlyOnce. startRunnerRig: a session-runner alone with its
 * StepLoad. startIngestRig: webhooks through a feed-ingestor and step-context
 * into feed streams. Everything started is registered in `cleanups`.
 */
import { randomUUID } from 'node:crypto';
import { TOPICS } from '@ctxflow/contracts';
import { Redis } from 'ioredis';
import { afterAll } from 'vitest';
import { requireKafka } from '../support/services.ts';
import { ExactlyOnce } from './exactly-once.ts';
import { TicketUpdatesWatch, WebhookSenders } from './feed-load.ts';
import {
  deletePrefix,
  ENTRIES,
  feedIngestor,
  freePort,
  PrivateRedis,
  runnerAndStepContext,
  SESSION_TIMEOUT_MS,
  ServiceProcess,
  serviceEnv,
  sleep,
  startGroupsAtEnd,
  stepContextProcess,
  stopAll,
} from './processes.ts';
import { StepLoad } from './step-load.ts';
import { TicketLoad } from './ticket-load.ts';

export type Cleanup = () => Promise<unknown>;

/**
 * A list of cleanups run after the suite's tests, last registered first (each
 * one's failure ignored), then every child process still running is stopped.
 */
export function cleanupsAfterAll(): Cleanup[] {
  const cleanups: Cleanup[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    await stopAll();
  });
  return cleanups;
}

/**
 * A private redis-server (see PrivateRedis) and the test's own client of it.
 * The client ignores connection errors when the server is down on purpose:
 * its commands wait for the reconnect.
 */
export async function privateRedis(
  cleanups: Cleanup[],
  options: Parameters<typeof PrivateRedis.start>[0],
): Promise<{ server: PrivateRedis; redis: Redis }> {
  const server = await PrivateRedis.start(options);
  cleanups.push(() => server.stop());
  const redis = new Redis(server.url);
  redis.on('error', () => {});
  cleanups.push(async () => redis.disconnect());
  return { server, redis };
}

export interface LoadRigOptions {
  /** Short tag of the test; the run id (`<tag>-<random>`) names its groups, keys, tickets and requests. */
  tag: string;
  /** The checker's name, printed with its report. */
  label: string;
  cleanups: Cleanup[];
  /** The services' Redis (REDIS_URL), unless `runnerEnv` or `stepContextEnv` names another. */
  redisUrl: string;
  /** The test's own view of that Redis: subscriptions and what landed are read through it. */
  redis: Redis;
  sessions: number;
  /** Tickets, each followed by `fanout` sessions (12 and 2 by default). */
  tickets?: number;
  fanout?: number;
  runnerEnv?: Record<string, string>;
  stepContextEnv?: Record<string, string>;
}

export interface LoadRig {
  brokers: string[];
  run: string;
  prefix: string;
  checker: ExactlyOnce;
  runner: ServiceProcess;
  stepContext: ServiceProcess;
  runnerUrl: string;
  stepContextPort: number;
  steps: StepLoad;
  sessions: string[];
  tickets: TicketLoad;
}

/** Starts the services, creates the sessions and subscribes them to their tickets. */
export async function startLoadRig(options: LoadRigOptions): Promise<LoadRig> {
  const { cleanups } = options;
  const brokers = requireKafka();
  const run = `${options.tag}-${randomUUID().slice(0, 8)}`;
  const prefix = `fault:${run}`;
  const runnerGroup = `fault-runner-${run}`;
  const stepContextGroup = `fault-step-context-${run}`;
  const resultsGroup = `fault-results-${run}`;
  await startGroupsAtEnd(brokers, [
    { groupId: runnerGroup, topic: TOPICS.stepRequests },
    { groupId: stepContextGroup, topic: TOPICS.ticketUpdates },
    { groupId: resultsGroup, topic: TOPICS.stepResults },
  ]);
  const { runner, stepContext, runnerPort, stepContextPort } = await runnerAndStepContext({
    common: {
      KAFKA_BROKERS: brokers.join(','),
      REDIS_URL: options.redisUrl,
      CTXFLOW_REDIS_PREFIX: prefix,
      KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
      CTXFLOW_LOG_LEVEL: 'error',
    },
    runnerGroup,
    stepContextGroup,
    ...(options.runnerEnv ? { runnerEnv: options.runnerEnv } : {}),
    ...(options.stepContextEnv ? { stepContextEnv: options.stepContextEnv } : {}),
  });
  cleanups.push(() => Promise.all([runner.stop(), stepContext.stop()]));
  await Promise.all([runner.start(), stepContext.start()]);

  const checker = new ExactlyOnce(options.label);
  const runnerUrl = `http://127.0.0.1:${runnerPort}`;
  const steps = new StepLoad({ run, runnerUrl, brokers, checker });
  cleanups.push(() => steps.close());
  await steps.listen(resultsGroup);
  const sessions = await steps.createSessions(options.sessions);
  const tickets = new TicketLoad({
    run,
    sessions,
    tickets: options.tickets ?? 12,
    fanout: options.fanout ?? 2,
    redis: options.redis,
    prefix,
    brokers,
    checker,
  });
  cleanups.push(() => tickets.close());
  await tickets.subscribe();
  return { brokers, run, prefix, checker, runner, stepContext, runnerUrl, stepContextPort, steps, sessions, tickets };
}

/**
 * One StepLoad round every `everyMs`, at least `minRounds` of them, until the
 * returned stop() is awaited (which waits for the last round).
 */
export function roundsUntilStopped(steps: StepLoad, everyMs = 100, minRounds = 0): { stop(): Promise<void> } {
  let going = true;
  const loop = (async () => {
    for (let rounds = 0; going || rounds < minRounds; rounds++) {
      await steps.round();
      await sleep(everyMs);
    }
  })();
  return {
    stop: async () => {
      going = false;
      await loop;
    },
  };
}

export interface RunnerRig {
  brokers: string[];
  run: string;
  prefix: string;
  checker: ExactlyOnce;
  runner: ServiceProcess;
  runnerUrl: string;
  steps: StepLoad;
}

/**
 * A session-runner alone, in fresh consumer groups that start at their topics'
 * ends, with step requests and app items over `sessions` sessions (StepLoad).
 * Its hook URL is a port nothing listens on: the hook is skipped at once.
 */
export async function startRunnerRig(options: {
  tag: string;
  label: string;
  cleanups: Cleanup[];
  redisUrl: string;
  sessions: number;
  logLevel?: 'error' | 'info';
}): Promise<RunnerRig> {
  const { cleanups } = options;
  const brokers = requireKafka();
  const run = `${options.tag}-${randomUUID().slice(0, 8)}`;
  const prefix = `fault:${run}`;
  const runnerGroup = `fault-runner-${run}`;
  const resultsGroup = `fault-results-${run}`;
  await startGroupsAtEnd(brokers, [
    { groupId: runnerGroup, topic: TOPICS.stepRequests },
    { groupId: resultsGroup, topic: TOPICS.stepResults },
  ]);
  const [port, noHook] = [await freePort(), await freePort()];
  const runner = new ServiceProcess({
    name: 'session-runner',
    entry: ENTRIES.runner,
    port,
    env: serviceEnv({
      KAFKA_BROKERS: brokers.join(','),
      REDIS_URL: options.redisUrl,
      CTXFLOW_REDIS_PREFIX: prefix,
      CTXFLOW_PORT: String(port),
      CTXFLOW_RUNNER_GROUP: runnerGroup,
      CTXFLOW_STEP_CONTEXT_URL: `http://127.0.0.1:${noHook}/step-context`,
      KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
      CTXFLOW_LOG_LEVEL: options.logLevel ?? 'error',
    }),
  });
  cleanups.push(() => runner.stop());
  await runner.start();

  const checker = new ExactlyOnce(options.label);
  const runnerUrl = `http://127.0.0.1:${port}`;
  const steps = new StepLoad({ run, runnerUrl, brokers, checker });
  cleanups.push(() => steps.close());
  await steps.listen(resultsGroup);
  await steps.createSessions(options.sessions);
  return { brokers, run, prefix, checker, runner, runnerUrl, steps };
}

export interface IngestRig {
  prefix: string;
  redis: Redis;
  checker: ExactlyOnce;
  feed: ServiceProcess;
  stepContext: ServiceProcess;
  tickets: TicketLoad;
  watch: TicketUpdatesWatch;
  senders: WebhookSenders;
}

/**
 * Webhooks to feed streams on the Kafka of `brokers`: a feed-ingestor and a
 * step-context process (fresh groups at the topic's end) on the shared Redis
 * under `fault:<run>` (deleted afterwards), four sessions following `tickets`
 * tickets two each, a watch of what reaches the topic, and `senders` webhook
 * senders (one delivery at a time each, retried until 202, 40 ms apart).
 */
export async function startIngestRig(options: {
  run: string;
  label: string;
  cleanups: Cleanup[];
  brokers: string[];
  redisUrl: string;
  secret: string;
  tickets: number;
  senders: number;
}): Promise<IngestRig> {
  const { cleanups, run, brokers } = options;
  const prefix = `fault:${run}`;
  const redis = new Redis(options.redisUrl);
  cleanups.push(async () => {
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });
  const stepContextGroup = `fault-step-context-${run}`;
  const watchGroup = `fault-watch-${run}`;
  await startGroupsAtEnd(brokers, [
    { groupId: stepContextGroup, topic: TOPICS.ticketUpdates },
    { groupId: watchGroup, topic: TOPICS.ticketUpdates },
  ]);

  const common = {
    KAFKA_BROKERS: brokers.join(','),
    REDIS_URL: options.redisUrl,
    CTXFLOW_REDIS_PREFIX: prefix,
    CTXFLOW_LOG_LEVEL: 'error',
  };
  const { feed, feedUrl } = await feedIngestor({ common, secret: options.secret });
  const stepContext = stepContextProcess({
    common: { ...common, KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS) },
    group: stepContextGroup,
    port: await freePort(),
  });
  cleanups.push(() => Promise.all([feed.stop(), stepContext.stop()]));
  await Promise.all([feed.start(), stepContext.start()]);

  const checker = new ExactlyOnce(options.label);
  const sessions = Array.from({ length: 4 }, (_, i) => `${run}-s${i}`);
  const tickets = new TicketLoad({
    run,
    sessions,
    tickets: options.tickets,
    fanout: 2,
    redis,
    prefix,
    brokers,
    checker,
  });
  cleanups.push(() => tickets.close());
  await tickets.subscribe();
  const watch = new TicketUpdatesWatch({ run, brokers });
  cleanups.push(() => watch.close());
  await watch.listen(watchGroup);
  const senders = new WebhookSenders({
    run,
    feedUrl,
    secret: options.secret,
    tickets: tickets.tickets,
    followers: tickets.followers,
    checker,
    senders: options.senders,
    pauseMs: 40,
    timeoutMs: 60_000,
  });
  return { prefix, redis, checker, feed, stepContext, tickets, watch, senders };
}
