/**
 * Fault: poison and duplicate records published straight onto the topics the
 * services consume. On TOPICS.ticketUpdates (step-context): bytes that are not
 * JSON, JSON that is not a TicketUpdate, and valid updates published twice in
 * one batch and again, later, after newer versions of their ticket. On
 * TOPICS.stepRequests (session-runner): bytes that are not JSON, requests
 * without a requestId or with an unknown mode, and valid requests published
 * again right after and two rounds later. Poison shares the keys (so the
 * partitions) of the valid records: a consumer that stalled on it would hold
 * back every valid record behind it. Every valid id lands exactly once, in
 * order, and every duplicated request answers its one committed step. Every
 * poison record is on its topic's dead-letter topic, with its reason and its
 * source position, its key and value kept: nothing vanished.
 */
import { createBus, readTopic } from '@ctxflow/bus';
import { DLQ_HEADERS, type TicketUpdate, TOPICS, ticketKey } from '@ctxflow/contracts';
import { RECORD_ID_HEADER } from '@ctxflow/step-context';
import { describe, expect, it } from 'vitest';
import { cleanupsAfterAll, privateRedis, startLoadRig } from './load-rig.ts';
import { sleep, waitFor } from './processes.ts';

const ROUNDS = 12;
const SESSIONS = 4;

describe('fault: poison and duplicate records on the topics', () => {
  const cleanups = cleanupsAfterAll();

  it('poison dead-lettered without stalling, duplicates applied once, every valid id exactly once', async () => {
    const { server: redisServer, redis } = await privateRedis(cleanups, { aof: false });
    // The tickets are used for their subscriptions and read-back; the updates are built here, duplicates included.
    const { brokers, run, checker, runnerUrl, stepContextPort, steps, sessions, tickets } = await startLoadRig({
      tag: 'fp',
      label: 'poison and duplicate records',
      cleanups,
      redisUrl: redisServer.url,
      redis,
      sessions: SESSIONS,
      tickets: 6,
    });
    const bus = createBus({ client: 'platformatic', clientId: `fault-poison-${run}`, brokers });
    cleanups.push(async () => {
      await bus.publisher.close();
      await bus.admin.close();
    });

    const versions = new Map<string, number>();
    const sentUpdates: TicketUpdate[] = [];
    const update = (n: number): TicketUpdate => {
      const ticket = tickets.tickets[n % tickets.tickets.length]!;
      const version = (versions.get(ticket) ?? 0) + 1;
      versions.set(ticket, version);
      const eventId = `${run}-u${n}`;
      const now = new Date().toISOString();
      return {
        id: `generic:${eventId}`,
        source: 'generic',
        ticket,
        eventId,
        kind: 'updated',
        summary: `update ${n} of ${ticket}`,
        version,
        occurredAt: now,
        receivedAt: now,
      };
    };
    const record = (u: TicketUpdate) => ({
      key: ticketKey(u),
      value: JSON.stringify(u),
      headers: { [RECORD_ID_HEADER]: u.id },
    });
    let poison = 0;
    let duplicates = 0;
    /** Poison sent, by DLQ topic and reason: `${key}\u0000${value}` each (keys are this run's own). */
    const poisonSent = new Map<string, string[]>();
    const sentPoison = (dlq: string, reason: string, key: string, value: string) => {
      const at = `${dlq} ${reason}`;
      poisonSent.set(at, [...(poisonSent.get(at) ?? []), `${key}\u0000${value}`]);
    };
    let n = 0;

    for (let round = 0; round < ROUNDS; round++) {
      // Ticket updates: valid ones, each ticket's key also carrying poison and duplicates.
      const batch = [];
      for (let i = 0; i < tickets.tickets.length; i++) {
        const u = update(n++);
        for (const session of tickets.followers.get(u.ticket)!) checker.sent(`${session}|${u.ticket}`, u.id);
        sentUpdates.push(u);
        const key = ticketKey(u);
        batch.push(record(u));
        batch.push(record(u)); // the same record twice in one batch
        duplicates += 1;
        if (i % 2 === 0) {
          const notJson = `{"id": "generic:${run}-poison-${poison}", "ticket": `;
          const invalid = JSON.stringify({ id: `generic:${run}-poison-${poison}x`, ticket: u.ticket });
          batch.push({ key, value: notJson });
          batch.push({ key, value: invalid });
          batch.push({ key, value: '' });
          sentPoison(TOPICS.ticketUpdatesDlq, 'not_json', key, notJson);
          sentPoison(TOPICS.ticketUpdatesDlq, 'invalid', key, invalid);
          sentPoison(TOPICS.ticketUpdatesDlq, 'not_json', key, '');
          poison += 3;
        }
      }
      // An update of two rounds ago, published again after newer versions of its ticket.
      if (round >= 2) {
        batch.push(record(sentUpdates[(round - 2) * tickets.tickets.length]!));
        duplicates += 1;
      }
      await bus.publisher.publish(TOPICS.ticketUpdates, batch);

      // Step requests: one round of items and requests, then duplicates and poison on the same keys.
      await steps.round();
      const current = steps.requested.slice(-SESSIONS);
      const requests = [];
      for (const [j, sessionId] of sessions.entries()) {
        requests.push({ key: sessionId, value: JSON.stringify({ sessionId, requestId: current[j], mode: 'first' }) });
        duplicates += 1;
        const poisonRequests: [string, string][] = [
          ['not_json', `{"sessionId":"${sessionId}","requestId":`],
          ['invalid', JSON.stringify({ sessionId })],
          ['invalid', JSON.stringify({ sessionId, requestId: `${run}-bogus-${round}`, mode: 'sideways' })],
        ];
        for (const [reason, value] of poisonRequests) {
          requests.push({ key: sessionId, value });
          sentPoison(TOPICS.stepRequestsDlq, reason, sessionId, value);
        }
        poison += 3;
      }
      if (round >= 2) {
        const old = steps.requested.at(-3 * SESSIONS)!;
        const sessionId = sessions[0]!;
        requests.push({ key: sessionId, value: JSON.stringify({ sessionId, requestId: old, mode: 'first' }) });
        duplicates += 1;
      }
      await bus.publisher.publish(TOPICS.stepRequests, requests);
      await sleep(100);
    }
    // One fault per injected record.
    for (let i = 0; i < poison; i++) checker.fault('poison record');
    for (let i = 0; i < duplicates; i++) checker.fault('duplicate record');

    const total = sentUpdates.length * 2;
    await waitFor('every ticket entry', async () => (await tickets.landedEntries(redis)) >= total, 30_000, 100);
    await steps.waitForResults(30_000);
    await sleep(1_500);

    const landed = await steps.landed();
    const report = checker.check(new Map([...landed.streams, ...(await tickets.landed(redis))]));
    const results = steps.checkResults(landed.stepOf);
    process.stdout.write(
      `[exactly-once] ${poison} poison and ${duplicates} duplicate records; ${results.repeated} repeated answer(s)\n`,
    );
    expect(report.faults).toBe(poison + duplicates);
    expect(report.inputs).toBe(total + steps.requested.length * 2);
    expect(results.problems.slice(0, 10)).toEqual([]);
    // Every duplicated request answered again (with its committed step, checked above).
    expect(results.repeated).toBeGreaterThanOrEqual(ROUNDS * SESSIONS);
    expect(landed.queued).toBe(0);
    // The services are still up and consuming after the poison.
    expect((await fetch(`http://127.0.0.1:${stepContextPort}/healthz`)).ok).toBe(true);
    expect((await fetch(`${runnerUrl}/healthz`)).ok).toBe(true);

    // Every poison record is on its dead-letter topic (shared by runs: only this run's keys count),
    // with its reason and a source position on the topic it came from; a redelivery may have
    // dead-lettered one twice, so positions are counted once.
    const ourKeys = new Set([...tickets.tickets.map((t) => `generic:${t}`), ...sessions]);
    const onDlq = new Map<string, string[]>();
    for (const [dlq, source] of [
      [TOPICS.ticketUpdatesDlq, TOPICS.ticketUpdates],
      [TOPICS.stepRequestsDlq, TOPICS.stepRequests],
    ] as const) {
      const seen = new Set<string>();
      for (const r of await readTopic({ brokers, clientId: `fault-poison-${run}` }, dlq)) {
        if (!ourKeys.has(r.key)) continue;
        expect(r.headers[DLQ_HEADERS.topic]).toBe(source);
        expect(r.headers[DLQ_HEADERS.offset]).toMatch(/^\d+$/);
        const position = `${r.headers[DLQ_HEADERS.partition]}:${r.headers[DLQ_HEADERS.offset]}`;
        if (seen.has(position)) continue;
        seen.add(position);
        const at = `${dlq} ${r.headers[DLQ_HEADERS.reason]}`;
        onDlq.set(at, [...(onDlq.get(at) ?? []), `${r.key}\u0000${r.value}`]);
      }
    }
    const sorted = (m: Map<string, string[]>) => new Map([...m].map(([k, v]) => [k, [...v].sort()]));
    expect(sorted(onDlq)).toEqual(sorted(poisonSent));
    expect([...onDlq.values()].flat()).toHaveLength(poison);
  }, 120_000);
});
