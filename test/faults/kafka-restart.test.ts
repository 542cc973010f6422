/**
 * Fault: the Kafka broker killed (-9) and restarted during ingest. A private
 * single-node broker (its own ports and data under .infra/faults/, never the
 * shared one) carries the ticket updates from a feed-ingestor to step-context.
 * Webhook senders retry each delivery until 202: while the broker is down the
 * feed-ingestor answers 503 with Retry-After. Every delivery lands exactly
 * once, in order per ticket, in its followers' feed streams; a record the
 * broker took but whose acknowledgement was lost may be on the topic twice,
 * and step-context drops the repeat by its record id.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { requireRedis } from '../support/services.ts';
import { PrivateKafka } from './kafka-broker.ts';
import { cleanupsAfterAll, startIngestRig } from './load-rig.ts';
import { sleep, waitFor } from './processes.ts';

const SECRET = 'fault-kafka-restart-secret';
const SENDERS = 4;
const PER_SENDER = 60;
const TICKETS = 8;

describe('fault: the Kafka broker killed and restarted during ingest', () => {
  const cleanups = cleanupsAfterAll();

  it('senders retry through the outage (503 + Retry-After); every delivery lands exactly once downstream', async () => {
    const run = `fk-${randomUUID().slice(0, 8)}`;
    const kafka = await PrivateKafka.start({ name: run });
    cleanups.push(() => kafka.stop());
    const { redis, checker, tickets, watch, senders } = await startIngestRig({
      run,
      label: 'Kafka broker restart during ingest',
      cleanups,
      brokers: kafka.brokers,
      redisUrl: requireRedis(),
      secret: SECRET,
      tickets: TICKETS,
      senders: SENDERS,
    });

    const started = Date.now();
    const sending = senders.send((i) => i < PER_SENDER);

    await waitFor('a third of the deliveries', () => senders.accepted >= (SENDERS * PER_SENDER) / 3, 30_000, 20);
    const acceptedBefore = senders.accepted;
    const down = Date.now();
    await kafka.kill9(1);
    await sleep(2_000);
    await kafka.startNode(1);
    const downMs = Date.now() - down;
    checker.fault(`kill -9 and restart of the broker after ${acceptedBefore} deliveries (down ${downMs} ms)`);
    await sending;
    const sendMs = Date.now() - started;

    const total = SENDERS * PER_SENDER * 2;
    await waitFor('every entry downstream', async () => (await tickets.landedEntries(redis)) >= total, 60_000, 100);
    await sleep(1_500);
    const report = checker.check(await tickets.landed(redis));
    let onTopic = 0;
    for (const ids of watch.streams.values()) onTopic += ids.length;
    const { accepted, attempts, unavailable } = senders;
    process.stdout.write(
      `[exactly-once] ${accepted} deliveries accepted in ${attempts} attempts (${unavailable} answered 503 + Retry-After) ` +
        `over ${sendMs} ms, broker down ${downMs} ms; ${onTopic} record(s) on the topic for ${accepted} deliveries\n`,
    );
    expect(report.faults).toBe(1);
    expect(report.inputs).toBe(total);
    expect(accepted).toBe(SENDERS * PER_SENDER);
    // The outage was seen by the senders: some attempt was answered 503 or could not be sent.
    expect(attempts).toBeGreaterThan(accepted);
  }, 120_000);
});
