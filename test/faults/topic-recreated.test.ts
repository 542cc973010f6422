/**
 * Fault: the log under step-context's stored offsets changes between two runs
 * of the service, on the real Kafka and Redis. (1) The ticket-updates topic is
 * deleted and created again while Redis keeps its state (an operator, a Strimzi
 * reconcile, a cluster migration). (2) The stored offsets are rewritten as a
 * Redis restored from another copy leaves them: an older copy of the same log,
 * a copy holding another topic's id, an offset past the log's end. Each time
 * the next update reaches its session within seconds; each mismatch is an
 * error line and a count in `ctxflow.consumer.offset_mismatches`; nothing
 * applied before is applied twice. The topics are this test's own
 * (KAFKA_TOPIC_PREFIX), so deleting them touches no other run.
 */
import { randomUUID } from 'node:crypto';
import { TOPICS, ticketKey } from '@ctxflow/contracts';
import { stepContextKeys } from '@ctxflow/step-context';
import { Redis } from 'ioredis';
import { Kafka, logLevel } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { partitionForKey } from '../../shared/bus/src/partition-for-key.ts';
import { kafkaTopicId, recreateKafkaTopic } from '../support/kafka-topics.ts';
import { requireKafka, requireRedis } from '../support/services.ts';
import { ExactlyOnce } from './exactly-once.ts';
import { cleanupsAfterAll } from './load-rig.ts';
import {
  deletePrefix,
  ENTRIES,
  freePort,
  type LogLine,
  SESSION_TIMEOUT_MS,
  ServiceProcess,
  serviceEnv,
  waitFor,
} from './processes.ts';
import { TicketLoad } from './ticket-load.ts';

/** Partitions step-context creates the ticket-updates topic with. */
const PARTITIONS = 12;
/** "Within seconds": from publish to the session's stream, after the restart. */
const WITHIN_MS = 10_000;
const PINO_ERROR = 50;
const MISMATCH_LINE = "stored offset does not fit the partition's log";

describe("fault: the log under step-context's stored offsets changes between two runs", () => {
  const cleanups = cleanupsAfterAll();

  /** step-context on topics of its own, a session per ticket, and the checker. */
  async function rig(name: string, client: 'platformatic' | 'kafkajs') {
    const brokers = requireKafka();
    const redisUrl = requireRedis();
    const run = `${name}-${randomUUID().slice(0, 8)}`;
    const prefix = `fault:${run}`;
    const topicPrefix = `fault-${run}.`;
    const topic = `${topicPrefix}${TOPICS.ticketUpdates}`;
    const groupId = `fault-step-context-${run}`;
    const redis = new Redis(redisUrl);
    redis.on('error', () => {});
    const checker = new ExactlyOnce(`${name} (${client})`);
    const sessions = Array.from({ length: PARTITIONS }, (_, i) => `${run}-s${i}`);
    const load = new TicketLoad({
      run,
      sessions,
      tickets: 24,
      fanout: 1,
      redis,
      prefix,
      brokers,
      checker,
      topicPrefix,
    });
    const port = await freePort();
    const service = new ServiceProcess({
      name: 'step-context',
      entry: ENTRIES.stepContext,
      port,
      env: serviceEnv({
        KAFKA_BROKERS: brokers.join(','),
        KAFKA_CLIENT: client,
        KAFKA_TOPIC_PREFIX: topicPrefix,
        REDIS_URL: redisUrl,
        CTXFLOW_REDIS_PREFIX: prefix,
        CTXFLOW_STEP_CONTEXT_PORT: String(port),
        CTXFLOW_STEP_CONTEXT_GROUP: groupId,
        KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
        CTXFLOW_LOG_LEVEL: 'warn',
      }),
    });
    cleanups.push(async () => {
      await service.stop();
      await load.close();
      await deletePrefix(redis, prefix);
      redis.disconnect();
      const admin = new Kafka({ clientId: 'ctxflow-fault-cleanup', brokers, logLevel: logLevel.NOTHING }).admin();
      await admin.connect();
      await admin.deleteTopics({ topics: [topic, `${topicPrefix}${TOPICS.ticketUpdatesDlq}`] }).catch(() => undefined);
      await admin.disconnect();
    });
    await load.subscribe();
    /** Tickets on distinct partitions, each followed by one session. */
    const byPartition = new Map<number, string>();
    for (const ticket of load.tickets) {
      const partition = partitionForKey(ticketKey({ source: 'generic', ticket }), PARTITIONS);
      if (!byPartition.has(partition)) byPartition.set(partition, ticket);
    }
    const tickets = [...byPartition.entries()].slice(0, 3).map(([partition, ticket]) => ({ partition, ticket }));
    const offsets = stepContextKeys(prefix).offsets;
    const stored = async (partition: number) => ({
      offset: await redis.hget(offsets, `${topic}:${partition}`),
      topicId: await redis.hget(offsets, `${topic}:${partition}:topic-id`),
    });
    /** Publishes one update of each ticket and waits until each landed; the wait, in ms. */
    const deliver = async (chosen: readonly { ticket: string }[]) => {
      const landedBefore = await load.landedEntries();
      const started = Date.now();
      await load.publishTo(chosen.map((c) => c.ticket));
      await waitFor(
        `${chosen.length} update(s) in the sessions' streams`,
        async () => (await load.landedEntries()) >= landedBefore + chosen.length,
        30_000,
      );
      return Date.now() - started;
    };
    const mismatchLines = () =>
      service.logs.filter((l) => l.level === PINO_ERROR && String(l.msg).startsWith(MISMATCH_LINE));
    const metrics = async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    return {
      brokers,
      redis,
      topic,
      groupId,
      offsets,
      service,
      load,
      checker,
      tickets,
      stored,
      deliver,
      mismatchLines,
      metrics,
    };
  }

  /** The counter's value for one partition and mismatch, from step-context's /metrics. */
  function mismatchCount(text: string, partition: number, mismatch: string): number {
    const line = text
      .split('\n')
      .find(
        (l) =>
          l.startsWith('ctxflow_consumer_offset_mismatches_total{') &&
          l.includes(`ctxflow_partition="${partition}"`) &&
          l.includes(`ctxflow_offset_mismatch="${mismatch}"`) &&
          l.includes('ctxflow_offset_reset="earliest"'),
      );
    return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
  }

  /** Whether all of the fields of `expected` are those of `line`. */
  const fits = (line: LogLine, expected: Record<string, unknown>) =>
    Object.entries(expected).every(([k, v]) => line[k] === v);

  it('the topic deleted and created again (platformatic): the next update lands within seconds, said once, nothing twice', async () => {
    const r = await rig('tr', 'platformatic');
    const { partition, ticket } = r.tickets[0]!;
    await r.service.start();
    await r.deliver([{ ticket }]);
    const oldId = await kafkaTopicId(r.brokers, r.topic);
    expect(oldId).toEqual(expect.any(String));
    expect(await r.stored(partition)).toEqual({ offset: '0', topicId: oldId });
    await r.service.stop();

    const newId = await recreateKafkaTopic(r.brokers, r.topic, PARTITIONS);
    r.checker.fault(`${r.topic} deleted and created again (${oldId} -> ${newId})`);
    expect(newId).not.toBe(oldId);
    // Kafka drops the group's committed offsets with the topic: only the stored one remains.
    const admin = new Kafka({
      clientId: 'ctxflow-fault-tests',
      brokers: r.brokers,
      logLevel: logLevel.NOTHING,
    }).admin();
    await admin.connect();
    const [committed] = await admin.fetchOffsets({ groupId: r.groupId, topics: [r.topic] });
    await admin.disconnect();
    expect(committed?.partitions.every((p) => p.offset === '-1')).toBe(true);

    await r.service.start();
    const waitedMs = await r.deliver([{ ticket }]);
    process.stdout.write(`[offsets] topic re-created: the next update landed ${waitedMs} ms after its publish\n`);
    expect(waitedMs).toBeLessThan(WITHIN_MS);
    const lines = r.mismatchLines();
    expect(lines).toHaveLength(1);
    expect(
      fits(lines[0]!, {
        topic: r.topic,
        partition,
        mismatch: 'topic_id',
        storedOffset: '0',
        storedTopicId: oldId,
        topicId: newId,
        logStart: '0',
        reset: 'earliest',
        resumeAt: '0',
        incarnation: 2,
      }),
      JSON.stringify(lines[0]),
    ).toBe(true);
    expect(mismatchCount(await r.metrics(), partition, 'topic_id')).toBe(1);
    expect(await r.stored(partition)).toEqual({ offset: '0', topicId: newId });
    const report = r.checker.check(await r.load.landed());
    expect(report.inputs).toBe(2);
    expect(report.faults).toBe(1);
  }, 120_000);

  it('Redis offsets from other copies (kafkajs): an older copy replays deduped; another topic id and past the end are said, reset, nothing twice', async () => {
    const r = await rig('tr-restore', 'kafkajs');
    const [older, foreign, beyond] = r.tickets;
    await r.service.start();
    await r.deliver([older!, foreign!, beyond!]);
    const copy = await r.stored(older!.partition);
    await r.deliver([older!, foreign!, beyond!]);
    await r.deliver([older!, foreign!, beyond!]);
    await r.service.stop();
    const id = await kafkaTopicId(r.brokers, r.topic);
    for (const { partition } of [older!, foreign!, beyond!]) {
      expect(await r.stored(partition)).toEqual({ offset: '2', topicId: id });
    }

    // The restore: an older copy of this log, a copy of another topic's, one past the end.
    const otherId = randomUUID();
    await r.redis.hset(r.offsets, `${r.topic}:${older!.partition}`, copy.offset!);
    await r.redis.hset(
      r.offsets,
      `${r.topic}:${foreign!.partition}`,
      '1',
      `${r.topic}:${foreign!.partition}:topic-id`,
      otherId,
    );
    await r.redis.hset(r.offsets, `${r.topic}:${beyond!.partition}`, '1000');
    r.checker.fault('Redis offsets rewritten: an older copy, another topic id, past the end');

    await r.service.start();
    const waitedMs = await r.deliver([older!, foreign!, beyond!]);
    process.stdout.write(`[offsets] offsets restored: the next updates landed ${waitedMs} ms after their publish\n`);
    expect(waitedMs).toBeLessThan(WITHIN_MS);
    const lines = r.mismatchLines();
    expect(lines.map((l) => [l.partition, l.mismatch]).sort()).toEqual(
      [
        [foreign!.partition, 'topic_id'],
        [beyond!.partition, 'beyond_end'],
      ].sort(),
    );
    // The log's end as the assignment found it: 3, or 4 when the next update was published first.
    const said = (partition: number) => lines.find((l) => l.partition === partition)!;
    expect(['3', '4']).toContain(said(foreign!.partition).logEnd);
    expect(
      fits(said(foreign!.partition), {
        storedOffset: '1',
        storedTopicId: otherId,
        topicId: id,
        logStart: '0',
        resumeAt: '0',
        incarnation: 2,
      }),
      JSON.stringify(lines),
    ).toBe(true);
    expect(
      fits(said(beyond!.partition), { storedOffset: '1000', storedTopicId: id, topicId: id, resumeAt: '0' }),
      JSON.stringify(lines),
    ).toBe(true);
    const text = await r.metrics();
    expect(mismatchCount(text, foreign!.partition, 'topic_id')).toBe(1);
    expect(mismatchCount(text, beyond!.partition, 'beyond_end')).toBe(1);
    for (const { partition } of [older!, foreign!, beyond!]) {
      await waitFor(
        `partition ${partition} consumed to its end`,
        async () => (await r.stored(partition)).offset === '3',
        10_000,
      );
      expect(await r.stored(partition)).toEqual({ offset: '3', topicId: id });
    }
    // Anything applied twice would have arrived with the replay: give it a moment to show.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const report = r.checker.check(await r.load.landed());
    expect(report.inputs).toBe(12);
  }, 120_000);
});
