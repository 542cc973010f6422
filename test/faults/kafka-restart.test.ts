/**
 * Fault: the Kafka broker killed (-9) and restarted during ingest. A private
 * single-node broker (its own ports and data under .infra/faults/, never the
 * shared one) carries the ticket updates from a feed-ingestor to step-context.
 * Webhook senders retry each delivery until 202: while the broker is down the
 * feed-ingestor answers 503 with Retry-After. Every delivery lands exactly
 * once, in order per ticket, in its followers' batch streams; a record the
 * broker took but whose acknowledgement was lost may be on the topic twice,
 * and step-context drops the repeat by its record id.
 */
import { randomUUID } from 'node:crypto';
import { TOPICS } from '@ctxflow/contracts';
import { Redis } from 'ioredis';
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

const SECRET = 'fault-kafka-restart-secret';
const SENDERS = 4;
const PER_SENDER = 60;
const TICKETS = 8;

describe('fault: the Kafka broker killed and restarted during ingest', () => {
  const cleanups = cleanupsAfterAll();

  it('senders retry through the outage (503 + Retry-After); every delivery lands exactly once downstream', async () => {
    const redisUrl = requireRedis();
    const run = `fk-${randomUUID().slice(0, 8)}`;
    const prefix = `fault:${run}`;
    const kafka = await PrivateKafka.start({ name: run });
    cleanups.push(() => kafka.stop());
    const brokers = kafka.brokers;
    const redis = new Redis(redisUrl);
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

    const checker = new ExactlyOnce('Kafka broker restart during ingest');
    const sessions = Array.from({ length: 4 }, (_, i) => `${run}-s${i}`);
    const tickets = new TicketLoad({ run, sessions, tickets: TICKETS, fanout: 2, redis, prefix, brokers, checker });
    cleanups.push(() => tickets.close());
    await tickets.subscribe();
    const watch = new TicketUpdatesWatch({ run, brokers });
    cleanups.push(() => watch.close());
    await watch.listen(watchGroup);

    let accepted = 0;
    let unavailable = 0;
    let attempts = 0;
    // Each sender owns some tickets and sends their updates one at a time, so order per ticket is its sending order.
    const sender = async (s: number) => {
      const own = tickets.tickets.filter((_, j) => j % SENDERS === s);
      const versions = new Map<string, number>();
      for (let i = 0; i < PER_SENDER; i++) {
        const ticket = own[i % own.length]!;
        const version = (versions.get(ticket) ?? 0) + 1;
        versions.set(ticket, version);
        const eventId = `${run}-s${s}-u${i}`;
        for (const session of tickets.followers.get(ticket)!)
          checker.sent(`${session}|${ticket}`, `generic:${eventId}`);
        const result = await deliverUntilAccepted(feedUrl, SECRET, genericBody(eventId, ticket, { version }), {
          timeoutMs: 60_000,
        });
        accepted += 1;
        unavailable += result.unavailable;
        attempts += result.attempts;
        await sleep(40);
      }
    };
    const started = Date.now();
    const sending = Promise.all(Array.from({ length: SENDERS }, (_, s) => sender(s)));

    await waitFor('a third of the deliveries', () => accepted >= (SENDERS * PER_SENDER) / 3, 30_000, 20);
    const acceptedBefore = accepted;
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
