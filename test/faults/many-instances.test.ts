/**
 * Fault: two instances of each service at once, on a three-broker Kafka and a
 * Redis Cluster, with seeded kill -9 of any instance. Two session-runners (one
 * consumer group on the step requests), two step-contexts (one consumer group
 * on the ticket updates) and two feed-ingestors run as child processes on a
 * private three-node KRaft cluster (topics of three replicas, min.insync 2)
 * and the shared three-node Redis Cluster (this run's own key prefix; the
 * feed-ingestors' delivery ledger is there too). Each runner reaches
 * step-context, and each step-context reaches the runners, through a TCP
 * balancer in front of both instances, as a Kubernetes Service does.
 *
 * Load, all at once: signed webhooks to either feed-ingestor at random (each
 * attempt picks again; retried until 202: a delivery the killed instance had
 * claimed waits out its lease, CTXFLOW_FEED_LEASE_MS, answered 503 +
 * Retry-After meanwhile), four sessions
 * subscribed at either step-context to the webhooks' tickets, two each, app
 * items over HTTP to either runner, step requests over Kafka, and steps over
 * HTTP to either runner (each with its requestId, sent again until answered).
 * Four times a seeded PRNG picks an instance and a moment (a feed-ingestor
 * first, whose claimed delivery waits out its lease meanwhile, then a runner
 * and a step-context in seeded order, then one more of those two kinds); the
 * instance is killed (-9) and restarted while the load goes on (never both
 * instances of one kind at once). The seed comes from CTXFLOW_FAULT_SEED (or
 * is random) and is printed at the start and in any failure; it fixes the
 * victims and the kill times.
 *
 * Exactly once: every delivery once in each follower's feed stream and once
 * in each follower's log (a hook row), in order per ticket; every step
 * request, over Kafka or HTTP, committed once, in order per session, and
 * answered with its one step; every app item once in its session's log.
 *
 * A failure names the directory holding the run's logs (test-results/faults/:
 * the test's timeline, each instance's log lines with its starts and kills,
 * each Kafka node's log with the group coordinator's joins and rebalances);
 * CTXFLOW_FAULT_KEEP_LOGS=1 keeps them for a passing run too, and
 * CTXFLOW_FAULT_DEBUG=<namespaces> hands DEBUG to the services (e.g.
 * `plt:kafka:consumer` logs the Kafka client's group events to their stderr).
 *
 * Longer than 400 lines: one seeded run of six processes on a private cluster; its checks read the whole run's history.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Cluster } from 'ioredis';
import { describe, expect, it, onTestFailed } from 'vitest';
import { requireRedisCluster } from '../support/services.ts';
import { ExactlyOnce } from './exactly-once.ts';
import { WebhookSenders } from './feed-load.ts';
import { PrivateKafka } from './kafka-broker.ts';
import { type Cleanup, cleanupsAfterAll, roundsUntilStopped } from './load-rig.ts';
import {
  ENTRIES,
  faultSeed,
  freePort,
  prng,
  SESSION_TIMEOUT_MS,
  ServiceProcess,
  serviceEnv,
  sleep,
  startGroupsAtEnd,
  waitFor,
} from './processes.ts';
import { persistently, StepLoad } from './step-load.ts';
import { TcpBalancer } from './tcp-balancer.ts';
import { TicketLoad } from './ticket-load.ts';

const SECRET = 'fault-many-instances-secret';
const SESSIONS = 4;
const TICKETS = 8;
const SENDERS = 4;
/** Kills per run: a feed-ingestor, a runner and a step-context, then one more runner or step-context. */
const KILLS = 4;
/** Window of a kill after the previous one (or the start of the load), in ms. */
const KILL_AFTER_MS = [1_000, 5_000] as const;
/** Steps over HTTP per session after the load at most, to bring what is left in the feed streams into the logs. */
const DRAIN_STEPS = 40;
/**
 * The consumer groups' rebalance timeout: how long a rebalance may wait for a member to
 * rejoin (a member starved of CPU), at least the session timeout. The bus's 60 s would let one
 * slow rejoin hold every partition of its group for a minute.
 */
const REBALANCE_TIMEOUT_MS = 20_000;
/** The feed-ingestors' delivery lease: a delivery the killed one had claimed is published again after it. */
const FEED_LEASE_MS = 10_000;
/**
 * Deadlines sized for a two-core machine busy with other suites (they bound a failure, they
 * are not what the test measures): each instance's start (six at once took up to 50 s, a
 * restart up to 25 s), each Kafka node's start (up to 100 s for the three), and how long the
 * load may take to land after the last restart (2 to 5 s as a rule: a killed member's
 * partitions wait out the session timeout, then a rebalance, then the backlog).
 */
const START_WITHIN_MS = 120_000;
const KAFKA_NODE_START_WITHIN_MS = 120_000;
const LAND_WITHIN_MS = 120_000;

const SEED = faultSeed();
/** Where a failed run leaves its evidence (the directory is named in the failure). */
const LOGS_DIR = fileURLToPath(new URL('../../test-results/faults/', import.meta.url));

/**
 * What a run keeps for a failure: the test's own timeline (test.log), each
 * instance's log lines with its starts and kills (<instance>.log) and each
 * Kafka node's log (kafka-node-<id>.log: the group coordinator's joins,
 * rebalances and expired members), written by `write` into `dir`.
 */
interface Evidence {
  dir: string;
  timeline: string[];
  write: () => void;
}

describe('fault: two instances of each service on a three-broker Kafka and a Redis Cluster', () => {
  const cleanups = cleanupsAfterAll();

  it(`seed=${SEED}: seeded kill -9 of any instance under load; every update reaches every follower once, every step commits once`, async () => {
    process.stdout.write(`[many-instances] seed=${SEED}\n`);
    const evidence: Evidence = { dir: '', timeline: [], write: () => {} };
    let kept: string | undefined;
    // A failure this test does not see (its time ran out) keeps the logs too, and says where.
    onTestFailed(() => {
      kept ??= keep(evidence);
      process.stdout.write(`[many-instances] seed=${SEED}: ${kept}\n`);
    });
    try {
      await scenario(cleanups, evidence);
      if (process.env.CTXFLOW_FAULT_KEEP_LOGS === '1') kept = keep(evidence);
    } catch (err) {
      kept = keep(evidence);
      if (err instanceof Error) {
        err.message = `seed=${SEED} (replay with CTXFLOW_FAULT_SEED=${SEED}; ${kept}): ${err.message}`;
      }
      throw err;
    }
  }, 420_000);
});

/** Writes a run's evidence; says where, or why not. */
function keep(evidence: Evidence): string {
  if (evidence.dir === '') return 'no logs: the run failed before its services started';
  try {
    mkdirSync(evidence.dir, { recursive: true });
    writeFileSync(join(evidence.dir, 'test.log'), `${evidence.timeline.join('\n')}\n`);
    evidence.write();
    return `the processes' logs are in ${evidence.dir}`;
  } catch (err) {
    return `the logs could not be written to ${evidence.dir}: ${String(err)}`;
  }
}

/** Deletes every key under `prefix:` on every master of the Cluster (one key per command: keys of many slots). */
async function deleteClusterPrefix(cluster: Cluster, prefix: string): Promise<void> {
  for (const node of cluster.nodes('master')) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      await Promise.all(keys.map((key) => node.unlink(key)));
    } while (cursor !== '0');
  }
}

/** A service instance as a child process, named with its kind and number. */
function instance(name: string, entry: string, port: number, env: Record<string, string>): ServiceProcess {
  return new ServiceProcess({ name, entry, port, env: serviceEnv(env) });
}

/**
 * The update ids a hook row carries, by ticket: step-context's notice names
 * its ticket on the line `ticket: "<ticket>"` and ends each update's line with
 * its quoted summary, which the webhooks set to `update <eventId>` (the update
 * id is `generic:<eventId>`).
 */
function updatesOfNotice(content: string): { ticket: string; ids: string[] } {
  const lines = content.split('\n');
  const ticketLine = lines.find((line) => line.startsWith('ticket: '));
  if (!ticketLine) throw new Error(`a hook row without a ticket line: ${content.slice(0, 200)}`);
  const ticket = JSON.parse(ticketLine.slice('ticket: '.length)) as string;
  const ids: string[] = [];
  for (const line of lines.slice(lines.findIndex((l) => l.startsWith('updates (')) + 1)) {
    const summary = /: ("(?:[^"\\]|\\.)*")$/.exec(line);
    if (!line.startsWith('- ') || !summary) continue;
    const text = JSON.parse(summary[1]!) as string;
    ids.push(text.startsWith('update ') ? `generic:${text.slice('update '.length)}` : `(summary ${text})`);
  }
  return { ticket, ids };
}

async function scenario(cleanups: Cleanup[], evidence: Evidence): Promise<void> {
  const t0 = Date.now();
  const timings: Record<string, number> = {};
  let mark = t0;
  /** A line of the test's timeline: printed, and kept with the time for test.log. */
  const note = (text: string) => {
    const now = Date.now();
    process.stdout.write(`[many-instances] +${now - t0} ms ${text}\n`);
    evidence.timeline.push(`${new Date(now).toISOString()} +${now - t0} ms ${text}`);
  };
  const lap = (name: string) => {
    const now = Date.now();
    timings[name] = now - mark;
    mark = now;
    note(name);
  };
  const random = prng(SEED);
  const between = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
  // Targets of each request: their own PRNG, so the kill plan depends on the seed alone.
  const pickTarget = prng(SEED ^ 0x9e3779b9);
  const anyOf = <T>(list: readonly T[]): T => list[Math.floor(pickTarget() * list.length)]!;

  const run = `mi-${randomUUID().slice(0, 8)}`;
  const prefix = `fault:${run}`;
  const clusterNodes = requireRedisCluster();
  note(`run ${run}`);

  const kafka = await PrivateKafka.start({
    name: run,
    nodes: 3,
    replicationFactor: 3,
    minInsyncReplicas: 2,
    startTimeoutMs: KAFKA_NODE_START_WITHIN_MS,
  });
  cleanups.push(() => kafka.stop());
  evidence.dir = join(LOGS_DIR, `many-instances-${SEED}-${run}`);
  evidence.write = () => kafka.keepLogs(evidence.dir);
  const brokers = kafka.brokers;
  const cluster = new Cluster(clusterNodes);
  cleanups.push(async () => {
    await deleteClusterPrefix(cluster, prefix);
    cluster.disconnect();
  });
  const resultsGroup = `fault-results-${run}`;
  // Every topic, created before the services start (a fresh cluster: every group starts at the beginning).
  await startGroupsAtEnd(brokers, []);
  lap('kafkaCluster');

  const runnerPorts = [await freePort(), await freePort()];
  const stepContextPorts = [await freePort(), await freePort()];
  const feedPorts = [await freePort(), await freePort()];
  const stepContextService = await TcpBalancer.start(stepContextPorts);
  cleanups.push(() => stepContextService.close());
  const common = {
    KAFKA_BROKERS: brokers.join(','),
    REDIS_CLUSTER_NODES: clusterNodes.map((n) => `${n.host}:${n.port}`).join(','),
    CTXFLOW_REDIS_PREFIX: prefix,
    CTXFLOW_LOG_LEVEL: 'warn',
    ...(process.env.CTXFLOW_FAULT_DEBUG ? { DEBUG: process.env.CTXFLOW_FAULT_DEBUG } : {}),
  };
  const consumer = {
    ...common,
    KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
    KAFKA_REBALANCE_TIMEOUT_MS: String(REBALANCE_TIMEOUT_MS),
  };
  const runners = runnerPorts.map((port, i) =>
    instance(`session-runner-${i + 1}`, ENTRIES.runner, port, {
      ...consumer,
      CTXFLOW_PORT: String(port),
      CTXFLOW_RUNNER_GROUP: `fault-runner-${run}`,
      CTXFLOW_STEP_CONTEXT_URL: `${stepContextService.url}/step-context`,
    }),
  );
  const stepContexts = stepContextPorts.map((port, i) =>
    instance(`step-context-${i + 1}`, ENTRIES.stepContext, port, {
      ...consumer,
      CTXFLOW_STEP_CONTEXT_PORT: String(port),
      CTXFLOW_STEP_CONTEXT_GROUP: `fault-step-context-${run}`,
    }),
  );
  const feeds = feedPorts.map((port, i) =>
    instance(`feed-ingestor-${i + 1}`, ENTRIES.feedIngestor, port, {
      ...common,
      CTXFLOW_FEED_PORT: String(port),
      CTXFLOW_FEED_SECRET_GENERIC: SECRET,
      CTXFLOW_FEED_LEASE_MS: String(FEED_LEASE_MS),
    }),
  );
  const kinds = [runners, stepContexts, feeds];
  const all = kinds.flat();
  cleanups.push(() => Promise.all(all.map((service) => service.stop())));
  evidence.write = () => {
    kafka.keepLogs(evidence.dir);
    for (const service of all) service.writeLog(evidence.dir);
  };
  await Promise.all(all.map((service) => service.start(START_WITHIN_MS)));
  lap('services');

  const checker = new ExactlyOnce(`two instances of each service, seeded kill -9 (seed=${SEED})`);
  const runnerUrls = runnerPorts.map((port) => `http://127.0.0.1:${port}`);
  const feedUrls = feedPorts.map((port) => `http://127.0.0.1:${port}/feeds/generic`);
  const steps = new StepLoad({ run, runnerUrl: () => anyOf(runnerUrls), brokers, checker });
  cleanups.push(() => steps.close());
  await steps.listen(resultsGroup);
  const sessions = await steps.createSessions(SESSIONS);
  const tickets = new TicketLoad({
    run,
    sessions,
    tickets: TICKETS,
    fanout: 2,
    redis: cluster,
    prefix,
    brokers,
    checker,
  });
  cleanups.push(() => tickets.close());
  // Each follower subscribes at either step-context, which reads the session's owner from the runners' records.
  const stepContextUrls = stepContextPorts.map((port) => `http://127.0.0.1:${port}`);
  for (const [ticket, followers] of tickets.followers) {
    for (const sessionId of followers) {
      const response = await persistently(() => `${anyOf(stepContextUrls)}/sessions/${sessionId}/subscriptions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ source: 'generic', ticket }),
      });
      if (response.status !== 201)
        throw new Error(`subscribe ${sessionId}: ${response.status} ${await response.text()}`);
    }
  }
  const senders = new WebhookSenders({
    run,
    feedUrl: () => anyOf(feedUrls),
    secret: SECRET,
    tickets: tickets.tickets,
    followers: tickets.followers,
    checker,
    senders: SENDERS,
    pauseMs: 60,
    timeoutMs: 45_000,
  });
  lap('sessions');

  // The load: webhooks, items and Kafka step requests, and one HTTP stepper per session.
  let loading = true;
  const sending = senders.send((i) => loading || i < 10);
  const stepping = roundsUntilStopped(steps, 100, 10);
  const httpStepping = Promise.all(
    sessions.map(async (sessionId) => {
      for (let n = 0; loading || n < 5; n++) {
        await steps.httpStep(sessionId);
        await sleep(100);
      }
    }),
  );
  // A failing load must not leave the kill loop waiting; each is awaited (and thrown) below.
  sending.catch(() => {});
  httpStepping.catch(() => {});

  // The plan (kinds: 0 runner, 1 step-context, 2 feed-ingestor), each kill of a seeded instance of its kind.
  // A delivery the killed feed-ingestor had claimed waits out its lease (FEED_LEASE_MS) before another instance
  // may publish it: that kill goes first, so the wait overlaps the others. Then a runner and a step-context in a
  // seeded order, then a seeded one of the two.
  const plan = [2, ...(random() < 0.5 ? [0, 1] : [1, 0])];
  while (plan.length < KILLS) plan.push(Math.floor(random() * 2));
  const restarts = new Map<ServiceProcess, Promise<void>>();
  const kills: string[] = [];
  const started = Date.now();
  try {
    for (const kind of plan) {
      const siblings = kinds[kind]!;
      const victim = siblings[Math.floor(random() * siblings.length)]!;
      await sleep(between(...KILL_AFTER_MS));
      // Never both instances of one kind down at once: wait for a restart still going.
      await Promise.all(siblings.map((s) => restarts.get(s)));
      await victim.kill9();
      const at = Date.now() - started;
      checker.fault(`kill -9 ${victim.name} at ${at} ms`);
      note(`kill -9 ${victim.name} #${victim.incarnation}`);
      const down = Date.now();
      const restart = victim.start(START_WITHIN_MS).then(() => {
        note(`${victim.name} #${victim.incarnation} answers /healthz`);
        kills.push(`${victim.name} at ${at} ms (down ${Date.now() - down} ms)`);
        restarts.delete(victim);
      });
      restart.catch(() => {}); // awaited (and thrown) before the next kill of its kind or after the last kill
      restarts.set(victim, restart);
    }
    await Promise.all(restarts.values());
  } finally {
    loading = false;
  }
  await sending;
  await stepping.stop();
  await httpStepping;
  lap('load');
  process.stdout.write(`[many-instances] seed=${SEED}: kills ${kills.join('; ')}\n`);

  const entries = senders.accepted * 2; // fan-out 2: one entry per delivery and follower
  await waitFor(
    'every delivery in its followers’ feed streams',
    async () => (await tickets.landedEntries()) >= entries,
    LAND_WITHIN_MS,
    100,
  );
  await steps.waitForResults(LAND_WITHIN_MS);
  lap('landed');

  // Steps over HTTP until every session's log holds every update its feed stream holds.
  const expectedPerSession = new Map(sessions.map((s) => [s, 0]));
  const batchStreams = await tickets.landed();
  for (const [stream, ids] of batchStreams) {
    const s = stream.slice(0, stream.indexOf('|'));
    expectedPerSession.set(s, (expectedPerSession.get(s) ?? 0) + ids.length);
  }
  const hookStreams = (hookRows: Map<string, string[]>) => {
    const streams = new Map<string, string[]>();
    for (const [sessionId, rows] of hookRows) {
      for (const row of rows) {
        const { ticket, ids } = updatesOfNotice(row);
        const stream = `${sessionId}|${ticket}`;
        streams.set(stream, [...(streams.get(stream) ?? []), ...ids]);
      }
    }
    return streams;
  };
  const inLog = (hookRows: Map<string, string[]>, sessionId: string) => {
    let n = 0;
    for (const [stream, ids] of hookStreams(hookRows)) if (stream.startsWith(`${sessionId}|`)) n += ids.length;
    return n;
  };
  let drainSteps = 0;
  for (let pass = 0; pass < DRAIN_STEPS; pass++) {
    const { hookRows, queued } = await steps.landed();
    const behind = sessions.filter((s) => inLog(hookRows, s) < expectedPerSession.get(s)!);
    if (behind.length === 0 && queued === 0) break;
    await Promise.all((behind.length > 0 ? behind : sessions).map((s) => steps.httpStep(s)));
    drainSteps += 1;
  }
  // Anything doubled would arrive late: give a redelivery time to show.
  await sleep(1_500);
  lap('drained');

  const landed = await steps.landed();
  const report = checker.check(new Map([...(await tickets.landed()), ...landed.streams]));
  // The same updates, now as they reached the sessions' logs through the hook.
  checker.check(new Map([...hookStreams(landed.hookRows), ...landed.streams]));
  const results = steps.checkResults(landed.stepOf);
  // Rebalances of each group as its coordinator logged them, and how many a leader's rejoin
  // started while the group was stable (none is needed: each kill and restart brings two).
  const rebalances = (group: string) => {
    const lines = kafka.nodeIds.flatMap((id) =>
      kafka.logLines(id, new RegExp(`Preparing to rebalance group ${group} `)),
    );
    return `${lines.length} (${lines.filter((line) => line.includes('re-joining group during Stable')).length} by a leader's rejoin)`;
  };
  process.stdout.write(
    `[many-instances] seed=${SEED}: ${report.faults} faults injected, ${report.inputs} inputs checked ` +
      `(${senders.accepted} deliveries in ${senders.attempts} attempts, ${steps.requested.length} step requests ` +
      `over Kafka, ${steps.httpRequested.length} over HTTP (${drainSteps} drain rounds), ${results.repeated} ` +
      `repeated answer(s)); step-context balancer ${JSON.stringify(stepContextService.counts)}; ` +
      `rebalances: runners ${rebalances(`fault-runner-${run}`)}, ` +
      `step-contexts ${rebalances(`fault-step-context-${run}`)}; timings ms ${JSON.stringify(timings)}; ` +
      `${Date.now() - t0} ms\n`,
  );
  expect(results.problems.slice(0, 10)).toEqual([]);
  expect(landed.queued).toBe(0); // every item was delivered by some step
  expect(report.faults).toBe(KILLS);
  expect(await tickets.landedEntries()).toBe(entries);
  expect(report.inputs).toBe(entries + steps.requested.length * 2 + steps.httpRequested.length);
}
