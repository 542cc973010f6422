/**
 * Fault: the log under the session-runner's committed step-request offsets
 * changes between two runs of the runner, on the real Kafka and Redis. The
 * runner keeps no offsets of its own: it resumes from its group's committed
 * offset. (1) The step-requests topic is deleted and created again, and a
 * member still reading the old log commits its position into the new one,
 * inside the new log's range: resumed from, it would skip the request below
 * it. On kafkajs the commit's metadata names the old topic id; on
 * @platformatic/kafka, whose commits carry no metadata, the runner's topic id
 * record (Redis) names the log the group began the partition in. (2) The
 * group's offset is set past the log's end (offsets copied from another
 * cluster, a reset by hand). Each time the next step
 * request is answered within seconds, the mismatch is one error line and one
 * count in `ctxflow.consumer.offset_mismatches`, and the partition is read
 * again from its first record: the requests answered before are answered again
 * with the same step (by request id), and the session gains no step. The
 * topics are this test's own (KAFKA_TOPIC_PREFIX), so deleting them touches no
 * other run.
 */
import { randomUUID } from 'node:crypto';
import { createBus, type KafkaClientName } from '@ctxflow/bus';
import { TOPICS } from '@ctxflow/contracts';
import { Consumer } from '@platformatic/kafka';
import { Redis } from 'ioredis';
import { Kafka, logLevel } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { partitionForKey } from '../../shared/bus/src/partition-for-key.ts';
import { kafkaTopicId, recreateKafkaTopic } from '../support/kafka-topics.ts';
import { requireKafka, requireRedis } from '../support/services.ts';
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

/** Partitions the runner creates the step-requests topic with. */
const PARTITIONS = 12;
/** "Within seconds": from publish to its result, after the restart. */
const WITHIN_MS = 10_000;
const PINO_ERROR = 50;
const MISMATCH_LINE = "committed step-request offset does not fit the partition's log";

interface StepResult {
  requestId: string;
  ok: boolean;
  stepId?: string;
}

describe("fault: the log under the runner's committed step-request offsets changes between two runs", () => {
  const cleanups = cleanupsAfterAll();

  async function rig(name: string, client: KafkaClientName) {
    const brokers = requireKafka();
    const redisUrl = requireRedis();
    const run = `${name}-${randomUUID().slice(0, 8)}`;
    const prefix = `fault:${run}`;
    const topicPrefix = `fault-${run}.`;
    const topic = `${topicPrefix}${TOPICS.stepRequests}`;
    const groupId = `fault-runner-${run}`;
    const redis = new Redis(redisUrl);
    redis.on('error', () => {});
    const [port, noHook] = [await freePort(), await freePort()];
    const runner = new ServiceProcess({
      name: 'session-runner',
      entry: ENTRIES.runner,
      port,
      env: serviceEnv({
        KAFKA_BROKERS: brokers.join(','),
        KAFKA_CLIENT: client,
        KAFKA_TOPIC_PREFIX: topicPrefix,
        REDIS_URL: redisUrl,
        CTXFLOW_REDIS_PREFIX: prefix,
        CTXFLOW_PORT: String(port),
        CTXFLOW_RUNNER_GROUP: groupId,
        CTXFLOW_STEP_CONTEXT_URL: `http://127.0.0.1:${noHook}/step-context`,
        KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
        CTXFLOW_LOG_LEVEL: 'warn',
      }),
    });
    const bus = createBus({ client: 'platformatic', clientId: `fault-steps-${run}`, brokers });
    const kafka = new Kafka({ clientId: `fault-steps-${run}`, brokers, logLevel: logLevel.NOTHING });
    cleanups.push(async () => {
      await runner.stop();
      await Promise.allSettled([bus.publisher.close(), bus.admin.close()]);
      await deletePrefix(redis, prefix);
      redis.disconnect();
      const admin = kafka.admin();
      await admin.connect();
      const topics = [TOPICS.stepRequests, TOPICS.stepResults, TOPICS.stepRequestsDlq].map((t) => `${topicPrefix}${t}`);
      await admin.deleteTopics({ topics }).catch(() => undefined);
      await admin.disconnect();
    });
    await runner.start();
    const url = `http://127.0.0.1:${port}`;
    const created = await fetch(`${url}/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(created.status).toBe(201);
    const { sessionId } = (await created.json()) as { sessionId: string };
    const partition = partitionForKey(sessionId, PARTITIONS);

    /** requestId -> every result record of it, in order. */
    const results = new Map<string, StepResult[]>();
    const listening = await bus.subscriber.subscribe({
      topic: `${topicPrefix}${TOPICS.stepResults}`,
      groupId: `fault-results-${run}`,
      handle: async (records) => {
        for (const record of records) {
          const result = JSON.parse(record.value) as StepResult;
          results.set(result.requestId, [...(results.get(result.requestId) ?? []), result]);
        }
      },
    });
    cleanups.push(() => listening.close());
    await listening.ready();

    const request = (requestId: string) =>
      bus.publisher.publish(topic, [
        { key: sessionId, value: JSON.stringify({ sessionId, requestId, mode: 'first' }) },
      ]);
    /** Publishes a step request and waits for its answer; the step id and the wait in ms. */
    const step = async (requestId: string) => {
      const started = Date.now();
      await request(requestId);
      await waitFor(`the answer to ${requestId}`, async () => results.get(requestId)?.some((r) => r.ok), 30_000);
      return { stepId: results.get(requestId)!.find((r) => r.ok)!.stepId!, waitedMs: Date.now() - started };
    };
    /** The group's committed offset of the session's partition, with its metadata. */
    const committed = async () => {
      const admin = kafka.admin();
      await admin.connect();
      try {
        const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
        const p = offsets?.partitions.find((o) => o.partition === partition);
        return { offset: p?.offset, metadata: p?.metadata ?? null };
      } finally {
        await admin.disconnect();
      }
    };
    const mismatchLines = () =>
      runner.logs.filter((l) => l.level === PINO_ERROR && String(l.msg).startsWith(MISMATCH_LINE));
    /** The one mismatch line of the second incarnation: the partition's, reset to its start, with `expected`'s fields. */
    const oneMismatchLine = (expected: Record<string, unknown>) => {
      const lines = mismatchLines();
      expect(lines).toHaveLength(1);
      const fields = { topic, partition, reset: 'earliest', resumeAt: '0', incarnation: 2, ...expected };
      expect(fits(lines[0]!, fields), JSON.stringify(lines[0])).toBe(true);
      return lines[0]!;
    };
    const mismatchCount = async (mismatch: string) => {
      const text = await (await fetch(`${url}/metrics`)).text();
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
    };
    const stepsOfSession = async () => {
      const response = await fetch(`${url}/sessions/${sessionId}/inspect`);
      return ((await response.json()) as { steps: { stepId: string }[] }).steps.map((s) => s.stepId);
    };
    return {
      brokers,
      kafka,
      redis,
      prefix,
      topic,
      groupId,
      partition,
      runner,
      results,
      request,
      step,
      committed,
      mismatchLines,
      oneMismatchLine,
      mismatchCount,
      stepsOfSession,
    };
  }

  /** Whether all of the fields of `expected` are those of `line`. */
  const fits = (line: LogLine, expected: Record<string, unknown>) =>
    Object.entries(expected).every(([k, v]) => line[k] === v);

  it('the topic created again and an offset committed from the old log (kafkajs): the next request is answered within seconds, said once', async () => {
    const r = await rig('sr', 'kafkajs');
    const first = await r.step('r1');
    await r.runner.stop();
    const oldId = await kafkaTopicId(r.brokers, r.topic);
    expect(await r.committed()).toEqual({ offset: '1', metadata: `ctxflow-topic-id:${oldId}` });

    const newId = await recreateKafkaTopic(r.brokers, r.topic, PARTITIONS);
    expect(newId).not.toBe(oldId);
    // Kafka drops the group's committed offsets with the topic...
    expect((await r.committed()).offset).toBe('-1');
    // ...and a member still reading the old log commits its position into the new one.
    const member = r.kafka.consumer({ groupId: r.groupId, sessionTimeout: SESSION_TIMEOUT_MS });
    await member.connect();
    await member.subscribe({ topic: r.topic });
    const joined = new Promise<void>((resolve) => member.on(member.events.GROUP_JOIN, () => resolve()));
    await member.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch: async () => {} });
    member.pause([{ topic: r.topic }]);
    await joined;
    await member.commitOffsets([
      { topic: r.topic, partition: r.partition, offset: '1', metadata: `ctxflow-topic-id:${oldId}` },
    ]);
    await member.disconnect();
    // The next request lands at offset 0 of the new log, below the committed 1.
    await r.request('r2');

    await r.runner.start();
    await waitFor('the answer to r2', async () => r.results.get('r2')?.some((x) => x.ok), WITHIN_MS);
    r.oneMismatchLine({
      mismatch: 'topic_id',
      committedOffset: '1',
      committedTopicId: oldId,
      topicId: newId,
      logStart: '0',
      logEnd: '1',
    });
    expect(await r.mismatchCount('topic_id')).toBe(1);
    const second = r.results.get('r2')!.find((x) => x.ok)!.stepId!;
    expect(await r.stepsOfSession()).toEqual([first.stepId, second]);
    // What it commits now names the new log.
    await waitFor(
      'the commit of r2',
      async () => (await r.committed()).metadata === `ctxflow-topic-id:${newId}`,
      10_000,
    );
    expect(await r.committed()).toEqual({ offset: '1', metadata: `ctxflow-topic-id:${newId}` });
  }, 120_000);

  it('the topic created again and an offset committed from the old log inside the new log (platformatic): the next request is answered within seconds, said once', async () => {
    const r = await rig('sr-in', 'platformatic');
    const first = await r.step('r1');
    await r.runner.stop();
    const oldId = await kafkaTopicId(r.brokers, r.topic);
    // The library commits no metadata: the offset does not name the log it was read in.
    expect(await r.committed()).toEqual({ offset: '1', metadata: null });
    // The runner recorded, beside the offsets, the topic id the group began the partition in.
    const recordKey = `${r.prefix}:session-runner:topic-ids:${r.groupId}:${r.topic}`;
    expect(await r.redis.hget(recordKey, String(r.partition))).toBe(oldId);

    const newId = await recreateKafkaTopic(r.brokers, r.topic, PARTITIONS);
    expect(newId).not.toBe(oldId);
    expect((await r.committed()).offset).toBe('-1');
    // A @platformatic/kafka member still reading the old log commits its position into the new topic.
    const member = new Consumer({
      clientId: `fault-steps-member-${r.groupId}`,
      bootstrapBrokers: r.brokers,
      groupId: r.groupId,
      sessionTimeout: SESSION_TIMEOUT_MS,
      heartbeatInterval: 1_000,
    });
    member.topics.track(r.topic);
    await member.joinGroup({});
    await member.commit({ offsets: [{ topic: r.topic, partition: r.partition, offset: 1n, leaderEpoch: -1 }] });
    await member.close(true);
    // The next request lands at offset 0 of the new log: the committed 1 is the log's end, inside its range.
    await r.request('r2');
    expect(await r.committed()).toEqual({ offset: '1', metadata: null });

    await r.runner.start();
    await waitFor('the answer to r2', async () => r.results.get('r2')?.some((x) => x.ok), WITHIN_MS);
    r.oneMismatchLine({
      mismatch: 'topic_id',
      committedOffset: '1',
      committedTopicId: oldId,
      committedTopicIdFrom: 'record',
      topicId: newId,
      logStart: '0',
      logEnd: '1',
    });
    expect(await r.mismatchCount('topic_id')).toBe(1);
    // Nothing answered twice: r1 was the old log's, r2 and the next request are answered once each.
    const second = r.results.get('r2')!.find((x) => x.ok)!.stepId!;
    const third = await r.step('r3');
    expect(r.results.get('r1')!.map((x) => x.stepId)).toEqual([first.stepId]);
    expect(r.results.get('r2')!.map((x) => x.stepId)).toEqual([second]);
    expect(r.results.get('r3')!.map((x) => x.stepId)).toEqual([third.stepId]);
    expect(await r.stepsOfSession()).toEqual([first.stepId, second, third.stepId]);
    await waitFor('the commit of r3', async () => (await r.committed()).offset === '2', 10_000);
    expect(r.mismatchLines()).toHaveLength(1);
    // The record now names the new log.
    expect(await r.redis.hget(recordKey, String(r.partition))).toBe(newId);
  }, 120_000);

  it('an offset past the log end (platformatic): the next request is answered within seconds; the replay answers the same steps', async () => {
    const r = await rig('sr-end', 'platformatic');
    const one = await r.step('r1');
    const two = await r.step('r2');
    await r.runner.stop();
    const id = await kafkaTopicId(r.brokers, r.topic);
    expect((await r.committed()).offset).toBe('2');
    const admin = r.kafka.admin();
    await admin.connect();
    await admin.setOffsets({
      groupId: r.groupId,
      topic: r.topic,
      partitions: [{ partition: r.partition, offset: '1000' }],
    });
    await admin.disconnect();
    expect((await r.committed()).offset).toBe('1000');

    await r.runner.start();
    const three = await r.step('r3');
    process.stdout.write(`[offsets] step requests past the end: the next request answered in ${three.waitedMs} ms\n`);
    expect(three.waitedMs).toBeLessThan(WITHIN_MS);
    const line = r.oneMismatchLine({
      mismatch: 'beyond_end',
      committedOffset: '1000',
      // The commit names none: the log the runner recorded beginning the partition in.
      committedTopicId: id,
      committedTopicIdFrom: 'record',
      topicId: id,
      logStart: '0',
    });
    // The log's end as the assignment found it: 2, or 3 when r3 was published first.
    expect(['2', '3']).toContain(line.logEnd);
    expect(await r.mismatchCount('beyond_end')).toBe(1);
    // The partition was read again from 0: r1 and r2 answered again, each with its step.
    await waitFor(
      'r1 and r2 answered again',
      async () => ['r1', 'r2'].every((requestId) => (r.results.get(requestId)?.length ?? 0) >= 2),
      10_000,
    );
    expect(r.results.get('r1')!.map((x) => x.stepId)).toEqual([one.stepId, one.stepId]);
    expect(r.results.get('r2')!.map((x) => x.stepId)).toEqual([two.stepId, two.stepId]);
    expect(r.results.get('r3')!.map((x) => x.stepId)).toEqual([three.stepId]);
    expect(await r.stepsOfSession()).toEqual([one.stepId, two.stepId, three.stepId]);
    await waitFor('the commit of r3', async () => (await r.committed()).offset === '3', 10_000);
  }, 120_000);
});
