/**
 * Fault: one broker of a three-node Kafka cluster killed (-9) and restarted
 * during ingest. A private KRaft cluster (three nodes, each broker and
 * controller, on loopback from the same Maven jars as scripts/infra.ts, data
 * under .infra/faults/) with topics of three replicas and min.insync.replicas
 * 2: acks=all writes go on with two of the three in sync. Webhook senders
 * retry each delivery until 202 (a 503 while partitions move to new leaders).
 * Every delivery lands exactly once, in order per ticket, in its followers'
 * feed streams, and the restarted node rejoins every partition's in-sync set.
 */
import { randomUUID } from 'node:crypto';
import { TOPICS } from '@ctxflow/contracts';
import { Kafka, logLevel } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { requireRedis } from '../support/services.ts';
import { PrivateKafka } from './kafka-broker.ts';
import { cleanupsAfterAll, startIngestRig } from './load-rig.ts';
import { sleep, waitFor } from './processes.ts';

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
    const run = `fkc-${randomUUID().slice(0, 8)}`;
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
    // Creates the topics with the cluster's default of three replicas.
    const { redis, checker, tickets, watch, senders } = await startIngestRig({
      run,
      label: 'Kafka cluster node restart during ingest',
      cleanups,
      brokers,
      redisUrl: requireRedis(),
      secret: SECRET,
      tickets: TICKETS,
      senders: SENDERS,
    });
    lap('services');
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

    // Senders go on until told to stop, so the ingest spans the kill, the outage and the restart.
    let stop = false;
    const sending = senders.send(() => !stop);

    await waitFor('deliveries before the kill', () => senders.accepted >= PHASE, 30_000, 20);
    const acceptedBefore = senders.accepted;
    lap('ingestBeforeKill');
    await kafka.kill9(VICTIM);
    // The two nodes left (a controller quorum and an in-sync pair) must keep taking acks=all writes.
    await waitFor('deliveries with one node down', () => senders.accepted >= acceptedBefore + PHASE, 30_000, 20);
    const acceptedWhileDown = senders.accepted - acceptedBefore;
    // The controller fenced the node (3 s broker session) and dropped it from every in-sync set, keeping the other two.
    await waitFor('node out of every in-sync set', async () => (await isrSizes()).every((n) => n === 2), 15_000, 200);
    lap('ingestWhileDown');
    await kafka.startNode(VICTIM);
    lap('nodeRestart');
    const acceptedAtRestart = senders.accepted;
    await waitFor('deliveries after the restart', () => senders.accepted >= acceptedAtRestart + PHASE, 30_000, 20);
    checker.fault(
      `kill -9 of node ${VICTIM} of ${NODES} after ${acceptedBefore} deliveries, restarted after ${acceptedAtRestart}`,
    );
    stop = true;
    await sending;
    lap('ingestAfterRestart');

    // Every delivery was accepted once the senders stopped; each has two followers.
    const entriesSent = senders.accepted * 2;
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
    const { accepted, attempts, unavailable } = senders;
    process.stdout.write(
      `[exactly-once] ${accepted} deliveries accepted in ${attempts} attempts (${unavailable} answered 503 + Retry-After); ` +
        `${acceptedWhileDown} while node ${VICTIM} was down ` +
        `${onTopic} record(s) on the topic; timings ms ${JSON.stringify(timings)}\n`,
    );
    expect(report.faults).toBe(1);
    expect(report.inputs).toBe(entriesSent);
    expect(acceptedWhileDown).toBeGreaterThanOrEqual(PHASE);
  }, 240_000);
});
