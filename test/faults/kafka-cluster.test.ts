/**
 * Fault: one broker of a three-node Kafka cluster killed (-9) and restarted
 * during ingest. A private KRaft cluster (three nodes, each broker and
 * controller, on loopback from the same Maven jars as scripts/infra.ts, data
 * under .infra/faults/) with topics of three replicas and min.insync.replicas
 * 2: acks=all writes go on with two of the three in sync. Webhook senders
 * retry each delivery until 202 (a 503 while partitions move to new leaders).
 * Every delivery lands exactly once, in order per ticket, in its followers'
 * batch streams, and the restarted node rejoins every partition's in-sync set.
 */
import { randomUUID } from 'node:crypto';
import { TOPICS } from '@ctxflow/contracts';
import { Redis } from 'ioredis';
import { Kafka, logLevel } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { requireRedis } from '../support/services.ts';
import { ExactlyOnce } from './exactly-once.ts';
import { deliverUntilAccepted, genericBody, TicketUpdatesWatch } from './feed-load.ts';
import { PrivateKafka } from './kafka-broker.ts';
import { cleanupsAfterAll } from './load-rig.ts';
import {
  deletePrefix,
  feedIngestor,
  freePort,
  SESSION_TIMEOUT_MS,
  sleep,
  startGroupsAtEnd,
  stepContextProcess,
  waitFor,
} from './processes.ts';
import { TicketLoad } from './ticket-load.ts';

const SECRET = 'fault-kafka-cluster-secret';
const NODES = 3;
const SENDERS = 4;
const TICKETS = 8;
/** Deliveries accepted in each phase: before the kill, while the node is down, after its restart. */
const PHASE = 40;
/** Deterministic victim: the last node, so the kill is not always of the first voter. */
const VICTIM = NODES;

describe('fault: one broker of a three-node Kafka cluster killed and restarted during ingest', () => {
  const cleanups = cleanupsAfterAll();

  it('acks=all ingest goes on with 2 of 3 in sync; every delivery lands exactly once; the node rejoins the ISR', async () => {
    const redisUrl = requireRedis();
    const run = `fkc-${randomUUID().slice(0, 8)}`;
    const prefix = `fault:${run}`;
    const timings: Record<string, number> = {};
    let mark = Date.now();
    const lap = (name: string) => {
      const now = Date.now();
      timings[name] = now - mark;
      mark = now;
    };

    const kafka = await PrivateKafka.start({ name: run, nodes: NODES, replicationFactor: 3, minInsyncReplicas: 2 });
    cleanups.push(() => kafka.stop());
    lap('clusterStart');
    const brokers = kafka.brokers;
    const redis = new Redis(redisUrl);
    cleanups.push(async () => {
      await deletePrefix(redis, prefix);
      redis.disconnect();
    });
    const stepContextGroup = `fault-step-context-${run}`;
    const watchGroup = `fault-watch-${run}`;
    // Creates the topics with the cluster's default of three replicas.
    await startGroupsAtEnd(brokers, [
      { groupId: stepContextGroup, topic: TOPICS.ticketUpdates },
      { groupId: watchGroup, topic: TOPICS.ticketUpdates },
    ]);
    const admin = new Kafka({ clientId: `fault-admin-${run}`, brokers, logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    cleanups.push(() => admin.disconnect());
    const isrSizes = async (): Promise<number[]> => {
      const meta = await admin.fetchTopicMetadata({ topics: [TOPICS.ticketUpdates] });
      return meta.topics[0]!.partitions.map((p) => p.isr.length);
    };
    const replicas = (await admin.fetchTopicMetadata({ topics: [TOPICS.ticketUpdates] })).topics[0]!.partitions.map(
      (p) => p.replicas.length,
    );
    expect(new Set(replicas)).toEqual(new Set([3]));
    await waitFor('every partition with 3 in sync', async () => (await isrSizes()).every((n) => n === 3), 30_000, 200);
    lap('topics');

    const common = {
      KAFKA_BROKERS: brokers.join(','),
      REDIS_URL: redisUrl,
      CTXFLOW_REDIS_PREFIX: prefix,
      CTXFLOW_LOG_LEVEL: 'error',
    };
    const { feed, feedUrl } = await feedIngestor({ common, secret: SECRET });
    const stepContext = stepContextProcess({
      common: { ...common, KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS) },
      group: stepContextGroup,
      port: await freePort(),
      runnerUrl: `http://127.0.0.1:${await freePort()}`,
    });
    cleanups.push(() => Promise.all([feed.stop(), stepContext.stop()]));
    await Promise.all([feed.start(), stepContext.start()]);

    const checker = new ExactlyOnce('Kafka cluster node restart during ingest');
    const sessions = Array.from({ length: 4 }, (_, i) => `${run}-s${i}`);
    const tickets = new TicketLoad({ run, sessions, tickets: TICKETS, fanout: 2, redis, prefix, brokers, checker });
    cleanups.push(() => tickets.close());
    await tickets.subscribe();
    const watch = new TicketUpdatesWatch({ run, brokers });
    cleanups.push(() => watch.close());
    await watch.listen(watchGroup);
    lap('services');

    let accepted = 0;
    let unavailable = 0;
    let attempts = 0;
    let entriesSent = 0;
    let stop = false;
    // Each sender owns some tickets and sends their updates one at a time, so order per ticket is its sending order.
    // Senders go on until told to stop, so the ingest spans the kill, the outage and the restart.
    const sender = async (s: number) => {
      const own = tickets.tickets.filter((_, j) => j % SENDERS === s);
      const versions = new Map<string, number>();
      for (let i = 0; !stop; i++) {
        const ticket = own[i % own.length]!;
        const version = (versions.get(ticket) ?? 0) + 1;
        versions.set(ticket, version);
        const eventId = `${run}-s${s}-u${i}`;
        for (const session of tickets.followers.get(ticket)!) {
          checker.sent(`${session}|${ticket}`, `generic:${eventId}`);
          entriesSent += 1;
        }
        const result = await deliverUntilAccepted(feedUrl, SECRET, genericBody(eventId, ticket, { version }), {
          timeoutMs: 60_000,
        });
        accepted += 1;
        unavailable += result.unavailable;
        attempts += result.attempts;
        await sleep(40);
      }
    };
    const sending = Promise.all(Array.from({ length: SENDERS }, (_, s) => sender(s)));

    await waitFor('deliveries before the kill', () => accepted >= PHASE, 30_000, 20);
    const acceptedBefore = accepted;
    lap('ingestBeforeKill');
    await kafka.kill9(VICTIM);
    // The two nodes left (a controller quorum and an in-sync pair) must keep taking acks=all writes.
    await waitFor('deliveries with one node down', () => accepted >= acceptedBefore + PHASE, 30_000, 20);
    const acceptedWhileDown = accepted - acceptedBefore;
    // The controller fenced the node (3 s broker session) and dropped it from every in-sync set, keeping the other two.
    await waitFor('node out of every in-sync set', async () => (await isrSizes()).every((n) => n === 2), 15_000, 200);
    lap('ingestWhileDown');
    await kafka.startNode(VICTIM);
    lap('nodeRestart');
    const acceptedAtRestart = accepted;
    await waitFor('deliveries after the restart', () => accepted >= acceptedAtRestart + PHASE, 30_000, 20);
    checker.fault(
      `kill -9 of node ${VICTIM} of ${NODES} after ${acceptedBefore} deliveries, restarted after ${acceptedAtRestart}`,
    );
    stop = true;
    await sending;
    lap('ingestAfterRestart');

    await waitFor(
      'every entry downstream',
      async () => (await tickets.landedEntries(redis)) >= entriesSent,
      60_000,
      100,
    );
    await sleep(1_500);
    const report = checker.check(await tickets.landed(redis));
    lap('drain');
    await waitFor('node back in every in-sync set', async () => (await isrSizes()).every((n) => n === 3), 30_000, 200);
    lap('isrRecovered');
    let onTopic = 0;
    for (const ids of watch.streams.values()) onTopic += ids.length;
    process.stdout.write(
      `[exactly-once] ${accepted} deliveries accepted in ${attempts} attempts (${unavailable} answered 503 + Retry-After); ` +
        `${acceptedWhileDown} while node ${VICTIM} was down ` +
        `${onTopic} record(s) on the topic; timings ms ${JSON.stringify(timings)}\n`,
    );
    expect(report.faults).toBe(1);
    expect(report.inputs).toBe(entriesSent);
    expect(entriesSent).toBe(accepted * 2);
    expect(acceptedWhileDown).toBeGreaterThanOrEqual(PHASE);
  }, 240_000);
});
