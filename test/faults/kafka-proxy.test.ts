/**
 * Fault: the network between the services and Kafka. A private single-node
 * broker advertises, on a second client listener, the port of a TCP proxy on
 * loopback (test/faults/kafka-broker.ts, test/faults/tcp-proxy.ts): the
 * feed-ingestor, step-context and session-runner are bootstrapped through the
 * proxy and reach the broker only through it (the test's own clients use the
 * direct listener). Under webhook ingest (senders retrying on 503 until 202)
 * and step load, the proxy in turn delays every chunk, black-holes the link
 * for longer than the consumer group session timeout (the broker expires the
 * members; the hung connections are reset at the end), and serves requests
 * but drops the answers and cuts the connection, from a produce on (the
 * phase starts the moment a Produce request reaches the proxy): the producer
 * sends again a produce the broker already appended, consumers fetch and
 * commit again.
 * Every delivery answered 202 is on the topic, a second copy only of one the
 * feed-ingestor answered 503 for; every delivery lands once in each
 * follower's feed stream, in order per ticket; every step request is
 * committed once, in order per session, and answered with its one step; every
 * app item once in its session's log. Each phase must bite: requests met its
 * mode, serve-then-drop took produces, the broker expired both services'
 * group members during the black hole.
 *
 * The scenario runs once with the services on each Kafka client,
 * @platformatic/kafka then kafkajs; CTXFLOW_FAULT_KAFKA_CLIENTS (e.g.
 * `kafkajs`) picks some. kafkajs 2.2.4 gives a partition's sequence number
 * back when a produce's answer is lost, so a concurrent send would take it
 * again and be answered as a duplicate without being written: the kafkajs
 * bus makes one send at a time and takes a fresh producer after a failed one
 * (shared/bus/src/kafkajs-publisher.ts).
 */
import { randomUUID } from 'node:crypto';
import type { KafkaClientName } from '@ctxflow/bus';
import { TOPICS } from '@ctxflow/contracts';
import { Redis } from 'ioredis';
import { beforeAll, describe, expect, it } from 'vitest';
import { requireRedis } from '../support/services.ts';
import { ExactlyOnce } from './exactly-once.ts';
import { TicketUpdatesWatch, WebhookSenders } from './feed-load.ts';
import { PrivateKafka } from './kafka-broker.ts';
import { cleanupsAfterAll } from './load-rig.ts';
import {
  deletePrefix,
  feedIngestor,
  runnerAndStepContext,
  SESSION_TIMEOUT_MS,
  sleep,
  startGroupsAtEnd,
  waitFor,
} from './processes.ts';
import { StepLoad } from './step-load.ts';
import type { ProxyMode } from './tcp-proxy.ts';
import { TicketLoad } from './ticket-load.ts';

/** The services' Kafka clients: both, or a comma-separated list from CTXFLOW_FAULT_KAFKA_CLIENTS. */
const CLIENTS = (process.env.CTXFLOW_FAULT_KAFKA_CLIENTS || 'platformatic,kafkajs').split(',').map((name) => {
  if (name !== 'platformatic' && name !== 'kafkajs') throw new Error(`CTXFLOW_FAULT_KAFKA_CLIENTS: no client ${name}`);
  return name satisfies KafkaClientName;
});
const SECRET = 'fault-kafka-proxy-secret';
const SENDERS = 4;
const TICKETS = 8;
const SESSIONS = 4;
/** Each mode in turn, for `ms`; after a black hole or dropped answers the hung connections are reset. */
const PHASES: { mode: Exclude<ProxyMode, 'pass'>; ms: number; delayMs?: number }[] = [
  { mode: 'delay', ms: 2_500, delayMs: 150 },
  { mode: 'drop-responses', ms: 2_000 },
  // Longer than the group session timeout: the broker expires both consumer groups' members.
  { mode: 'blackhole', ms: SESSION_TIMEOUT_MS + 1_000 },
  { mode: 'delay', ms: 1_500, delayMs: 40 },
  { mode: 'drop-responses', ms: 2_000 },
];

describe('fault: a TCP proxy between the services and Kafka that delays, black-holes and drops answers', () => {
  const cleanups = cleanupsAfterAll();
  let kafka: PrivateKafka;
  beforeAll(async () => {
    kafka = await PrivateKafka.start({ name: `fp-${randomUUID().slice(0, 8)}`, proxied: true });
    cleanups.push(() => kafka.stop());
  });

  for (const client of CLIENTS) {
    it(`${client}: every delivery, item and step request once, in order, under each mode`, async () => {
      // This client's services and clients end with its scenario, before the next client's starts.
      const own: (() => Promise<unknown>)[] = [];
      try {
        await scenario(kafka, client, own);
      } finally {
        for (const cleanup of own.reverse()) await cleanup().catch(() => {});
      }
    }, 120_000);
  }
});

async function scenario(
  kafka: PrivateKafka,
  client: KafkaClientName,
  cleanups: (() => Promise<unknown>)[],
): Promise<void> {
  const redisUrl = requireRedis();
  const run = `fp-${randomUUID().slice(0, 8)}`;
  const prefix = `fault:${run}`;
  const [proxy] = kafka.proxies;
  if (!proxy || kafka.proxies.length !== 1) throw new Error('one proxied node expected');
  const redis = new Redis(redisUrl);
  cleanups.push(async () => {
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });
  const runnerGroup = `fault-runner-${run}`;
  const stepContextGroup = `fault-step-context-${run}`;
  const resultsGroup = `fault-results-${run}`;
  const watchGroup = `fault-watch-${run}`;
  await startGroupsAtEnd(kafka.brokers, [
    { groupId: runnerGroup, topic: TOPICS.stepRequests },
    { groupId: stepContextGroup, topic: TOPICS.ticketUpdates },
    { groupId: resultsGroup, topic: TOPICS.stepResults },
    { groupId: watchGroup, topic: TOPICS.ticketUpdates },
  ]);

  // The services know the proxy only.
  const common = {
    KAFKA_BROKERS: kafka.proxiedBrokers.join(','),
    KAFKA_CLIENT: client,
    KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
    REDIS_URL: redisUrl,
    CTXFLOW_REDIS_PREFIX: prefix,
    CTXFLOW_LOG_LEVEL: 'error',
  };
  const { feed, feedUrl } = await feedIngestor({ common, secret: SECRET });
  const { runner, stepContext, runnerPort } = await runnerAndStepContext({ common, runnerGroup, stepContextGroup });
  const services = [feed, runner, stepContext];
  cleanups.push(() => Promise.all(services.map((s) => s.stop())));
  await Promise.all(services.map((s) => s.start()));
  if (proxy.counts.connections === 0) throw new Error('the services did not connect through the proxy');

  const checker = new ExactlyOnce(`TCP proxy to Kafka (${client}): delay, black hole, dropped answers`);
  const steps = new StepLoad({ run, runnerUrl: `http://127.0.0.1:${runnerPort}`, brokers: kafka.brokers, checker });
  cleanups.push(() => steps.close());
  await steps.listen(resultsGroup);
  const sessions = await steps.createSessions(SESSIONS);
  const tickets = new TicketLoad({
    run,
    sessions,
    tickets: TICKETS,
    fanout: 2,
    redis,
    prefix,
    brokers: kafka.brokers,
    checker,
  });
  cleanups.push(() => tickets.close());
  await tickets.subscribe();
  const watch = new TicketUpdatesWatch({ run, brokers: kafka.brokers });
  cleanups.push(() => watch.close());
  await watch.listen(watchGroup);

  const senders = new WebhookSenders({
    run,
    feedUrl,
    secret: SECRET,
    tickets: tickets.tickets,
    followers: tickets.followers,
    checker,
    senders: SENDERS,
    pauseMs: 40,
    timeoutMs: 60_000,
  });
  const started = Date.now();
  let loading = true;
  const load = Promise.all([
    senders.send((i) => loading || i < 5),
    (async () => {
      for (let rounds = 0; loading || rounds < 5; rounds++) {
        await steps.round();
        await sleep(150);
      }
    })(),
  ]);
  // A failing load must not leave the phases running; it is awaited (and thrown) below.
  load.catch(() => {});

  /** What each phase did to the traffic: requests that met its mode, answers dropped, connections cut. */
  const bites: { phase: string; requests: number; produces: number; cut: number }[] = [];
  try {
    for (const phase of PHASES) {
      await sleep(1_000);
      const before = {
        requests: kafka.requests.count(phase.mode),
        produces: kafka.requests.count(phase.mode, 'Produce'),
        cut: proxy.counts.cut,
      };
      if (phase.mode === 'drop-responses') {
        // From the next produce on: its request reaches the broker and is appended, its answer is dropped.
        const produced = await kafka.requests.whenNext('Produce', 5_000, () => {
          proxy.setMode('drop-responses');
          return 'drop-responses';
        });
        if (!produced) throw new Error('no produce within 5 s to start dropping answers at');
      } else {
        proxy.setMode(phase.mode, { delayMs: phase.delayMs ?? 0 });
      }
      await sleep(phase.ms);
      proxy.setMode('pass');
      // Connections that lost bytes are out of step with the broker: end them, as a timeout would.
      if (phase.mode !== 'delay') proxy.reset();
      const what = `${phase.mode} for ${phase.ms} ms${phase.delayMs ? ` (${phase.delayMs} ms per chunk)` : ''}`;
      checker.fault(what);
      bites.push({
        phase: what,
        requests: kafka.requests.count(phase.mode) - before.requests,
        produces: kafka.requests.count(phase.mode, 'Produce') - before.produces,
        cut: proxy.counts.cut - before.cut,
      });
    }
  } finally {
    loading = false;
  }
  await load;
  const loadMs = Date.now() - started;

  // acks=all: a delivery answered 202 is on the topic (the watch reads it from the direct listener).
  const onTopic = () => new Set([...watch.streams.values()].flat());
  const notOnTopic = () => {
    const ids = onTopic();
    return senders.delivered.filter((id) => !ids.has(id));
  };
  await waitFor('every accepted delivery on the topic', () => notOnTopic().length === 0, 20_000, 100).catch(() => {});
  expect(notOnTopic(), 'deliveries answered 202 that never reached the topic').toEqual([]);
  const entries = senders.accepted * 2; // fan-out 2: one entry per delivery and follower
  await waitFor(
    'every delivery in its followers’ feed streams',
    async () => (await tickets.landedEntries()) >= entries,
    60_000,
    100,
  );
  await steps.waitForResults(60_000);
  // Anything doubled would arrive late: give a redelivery time to show.
  await sleep(1_500);

  // A second copy on the topic only of a delivery whose publish the feed-ingestor gave up on (answered
  // 503); a produce the producer itself retried stays single (idempotent producer).
  const copies = watch.count() - onTopic().size;
  // The black hole outlasted the session timeout: the broker expired the services' group members.
  const expired = kafka
    .logLines(1, /has failed, removing it from the group/)
    .flatMap((line) => [runnerGroup, stepContextGroup].filter((group) => line.includes(` in group ${group} `)));

  const landed = await steps.landed();
  const report = checker.check(new Map([...(await tickets.landed()), ...landed.streams]));
  const results = steps.checkResults(landed.stepOf);
  process.stdout.write(
    `[exactly-once] ${client}: ${report.faults} faults injected, ${report.inputs} inputs checked ` +
      `(${senders.accepted} deliveries in ${senders.attempts} attempts, ${senders.unavailable} answered 503; ` +
      `${watch.count()} record(s) on the topic, ${copies} second copies; ${steps.requested.length} step requests, ` +
      `${results.repeated} repeated answer(s)); load ${loadMs} ms, ${Date.now() - started} ms in all\n` +
      `[kafka-proxy] ${client}: bites ${JSON.stringify(bites)}; requests by mode ${JSON.stringify(kafka.requests)}; ` +
      `proxy ${JSON.stringify(proxy.counts)}; members expired: ${expired.join(', ')}\n`,
  );
  expect(report.faults).toBe(PHASES.length);
  expect(await tickets.landedEntries()).toBe(entries);
  expect(report.inputs).toBe(entries + steps.requested.length * 2);
  expect(results.problems.slice(0, 10)).toEqual([]);
  expect(landed.queued).toBe(0);
  expect(watch.odd).toEqual([]);
  expect(copies).toBeLessThanOrEqual(senders.unavailable);
  expect(new Set(expired)).toEqual(new Set([runnerGroup, stepContextGroup]));
  // Every phase hit traffic: requests were delayed, swallowed, or served with their answers dropped.
  expect(bites.filter((b) => b.requests === 0).map((b) => b.phase)).toEqual([]);
  // Each serve-then-drop phase began with a produce the broker appended and whose answer was dropped.
  for (const bite of bites.filter((b) => b.phase.startsWith('drop-responses'))) {
    expect(bite.produces, bite.phase).toBeGreaterThan(0);
    expect(bite.cut, bite.phase).toBeGreaterThan(0);
  }
}
