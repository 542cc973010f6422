/**
 * Fault: kill -9 of the session-runner between a step's commit and the relay
 * of its context-row events (CTXFLOW_CONTEXT_ROW_EVENTS=true). App items and
 * steps (each with its requestId, sent again until answered) arrive over HTTP
 * on four sessions; a helper on Redis MONITOR freezes the runner (SIGSTOP) as a
 * commit script records its request, and when an outbox still holds rows at
 * that moment the kill falls between commit and relay (aimed again until one
 * did, three times at most). Each incarnation of the runner consumes step requests in a
 * group of its own, so a restart does not wait out the dead member's session.
 *
 * The consumer is a foreign one: a plain kafkajs consumer (not the repo's bus)
 * reading TOPICS.contextRows in read_committed isolation, each record read with
 * the `cloudevents` SDK's Kafka binding and checked against docs/asyncapi.yaml's
 * ContextRowEvent as @asyncapi/parser resolves it. The relay publishes each batch
 * in a Kafka transaction with its progress record (context-row-relay.ts), so
 * across the kill -9 the consumer must read exactly one record per committed row
 * id (none repeated), every committed row (the sessions' logs in Redis) there, in
 * log order per session, its data equal to the row.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Parser } from '@asyncapi/parser';
import { createKafkajsBus } from '@ctxflow/bus';
import { TOPICS } from '@ctxflow/contracts';
import { Ajv } from 'ajv';
import { type CloudEvent, Kafka as CloudEventsKafka, type KafkaMessage } from 'cloudevents';
import { Redis } from 'ioredis';
import { Kafka, logLevel } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { ASYNCAPI_PATH } from '../../scripts/asyncapi.ts';
import { CONTEXT_ROW_PROGRESS_TOPIC } from '../../services/session-runner/src/context-row-relay.ts';
import { requireKafka } from '../support/services.ts';
import { ExactlyOnce } from './exactly-once.ts';
import { cleanupsAfterAll } from './load-rig.ts';
import {
  between,
  ENTRIES,
  freePort,
  freezeOnCommit,
  PrivateRedis,
  SESSION_TIMEOUT_MS,
  ServiceProcess,
  serviceEnv,
  sleep,
  startGroupsAtEnd,
  waitFor,
} from './processes.ts';
import { persistently, StepLoad } from './step-load.ts';

interface Consumed {
  partition: number;
  key: string;
  value: string;
  headers: Record<string, string>;
}

/** The ContextRowEvent message of docs/asyncapi.yaml, as @asyncapi/parser resolves it: its payload and headers validators. */
async function contextRowEventSchemas() {
  const { document, diagnostics } = await new Parser().parse(readFileSync(ASYNCAPI_PATH, 'utf8'));
  expect(diagnostics.filter((d) => d.severity === 0)).toEqual([]);
  const message = document!.components().messages().get('ContextRowEvent');
  expect(message).toBeDefined();
  // `ce_time` is checked by the schema's pattern; Ajv has no date-time format of its own.
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
  return { payload: ajv.compile(message!.payload()!.json()), headers: ajv.compile(message!.headers()!.json()) };
}

describe('fault: kill -9 of the session-runner between commit and the relay of its context-row events', () => {
  const cleanups = cleanupsAfterAll();

  it('a foreign read_committed kafkajs consumer reads exactly one CloudEvent per committed row, each valid against the AsyncAPI schema', async () => {
    const redisServer = await PrivateRedis.start({ aof: false });
    cleanups.push(() => redisServer.stop());
    const redis = new Redis(redisServer.url);
    cleanups.push(async () => redis.disconnect());
    const schemas = await contextRowEventSchemas();

    const started = Date.now();
    const brokers = requireKafka();
    const run = `f-rows-${randomUUID().slice(0, 8)}`;
    const prefix = `fault:${run}`;
    const [port, noHook] = [await freePort(), await freePort()];
    const runnerUrl = `http://127.0.0.1:${port}`;
    // Each incarnation of the runner in a consumer group of its own (at the step requests' end): a restart
    // after kill -9 then joins at once instead of waiting out the dead member's session. Steps go over HTTP.
    let runner: ServiceProcess | undefined;
    let incarnation = 0;
    const startRunner = async () => {
      incarnation += 1;
      const group = `fault-runner-${run}-${incarnation}`;
      await startGroupsAtEnd(brokers, [{ groupId: group, topic: TOPICS.stepRequests }]);
      const next = new ServiceProcess({
        name: `session-runner-${incarnation}`,
        entry: ENTRIES.runner,
        port,
        env: serviceEnv({
          KAFKA_BROKERS: brokers.join(','),
          REDIS_URL: redisServer.url,
          CTXFLOW_REDIS_PREFIX: prefix,
          CTXFLOW_PORT: String(port),
          CTXFLOW_RUNNER_GROUP: group,
          CTXFLOW_STEP_CONTEXT_URL: `http://127.0.0.1:${noHook}/step-context`,
          KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
          CTXFLOW_LOG_LEVEL: 'error',
          CTXFLOW_CONTEXT_ROW_EVENTS: 'true',
        }),
      });
      cleanups.push(() => next.stop());
      await next.start();
      runner = next;
    };
    // The foreign consumer: its own group, from the topic's end on; it joins while the runner starts.
    const group = `fault-rows-${run}`;
    await startGroupsAtEnd(brokers, [{ groupId: group, topic: TOPICS.contextRows }]);
    const kafka = new Kafka({ clientId: `fault-rows-${run}`, brokers, logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    cleanups.push(() => admin.disconnect());
    /** partition -> its end when the group started there: no record of this run lies below it. */
    const startedAt = new Map((await admin.fetchTopicOffsets(TOPICS.contextRows)).map((o) => [o.partition, o.high]));
    // read_committed: what aborted transactions wrote is never handed out.
    const consumer = kafka.consumer({ groupId: group, readUncommitted: false });
    cleanups.push(() => consumer.disconnect());
    const ours = new Set<string>();
    const consumed: Consumed[] = [];
    /** partition -> the offset after the last record this consumer read. */
    const position = new Map<number, bigint>();
    // Per batch, control records (transaction markers) included: a partition's last offset may be a marker.
    consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
      position.set(payload.partition, BigInt(payload.lastOffset) + 1n);
    });
    const consuming = (async () => {
      await consumer.connect();
      await consumer.subscribe({ topic: TOPICS.contextRows });
      await consumer.run({
        eachMessage: async ({ partition, message }) => {
          const key = message.key?.toString('utf8') ?? '';
          if (!ours.has(key)) return; // another run's
          const headers: Record<string, string> = {};
          for (const [name, value] of Object.entries(message.headers ?? {})) headers[name] = String(value);
          consumed.push({ partition, key, value: message.value?.toString('utf8') ?? '', headers });
        },
      });
    })();
    await Promise.all([startRunner(), consuming]);
    const steps = new StepLoad({ run, runnerUrl, brokers, checker: new ExactlyOnce('context-row steps') });
    cleanups.push(() => steps.close());
    const sessions = await steps.createSessions(4);
    for (const sessionId of sessions) ours.add(sessionId);

    // The load: per session, an app item then a step over HTTP (its requestId recorded by the commit), again and again.
    let going = true;
    let counter = 0;
    const load = Promise.all(
      sessions.map(async (sessionId) => {
        for (let round = 0; going || round < 5; round++) {
          const key = `${run}-i${counter++}`;
          const response = await persistently(`${runnerUrl}/context`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ sessionId, key, items: [{ kind: 'notice', content: `item ${key}` }] }),
          });
          expect(response.status).toBe(200);
          await steps.httpStep(sessionId);
        }
      }),
    );
    let betweenCommitAndRelay = 0;
    // How many entries the dead runner's relay had committed to Kafka (its shard's last progress
    // record names them) but not yet removed from the outbox: the ones the takeover removes.
    let leftCommitted = 0;
    const progressBus = createKafkajsBus({ brokers, clientId: `fault-rows-progress-${run}` });
    cleanups.push(() => progressBus.admin.close());
    const committedButNotRemoved = async () => {
      let n = 0;
      for (let shard = 0; shard < 4; shard++) {
        // Opened under the shard's id, as the next relay's takeover does: the dead relay's open
        // transaction is aborted first, so the read is not held back by it.
        const id = `${prefix}-context-rows-${shard}`;
        const fence = await progressBus.transactions.open(id);
        const last = await fence.lastCommitted(CONTEXT_ROW_PROGRESS_TOPIC, shard, id).finally(() => fence.close());
        if (last === undefined) continue;
        for (const [sessionId, ref] of JSON.parse(last.value).refs as [string, string][]) {
          n += (await redis.xrange(`${prefix}:{${sessionId}}:outbox`, ref, ref)).length;
        }
      }
      return n;
    };
    let kills = 0;
    const outboxed = async () => {
      let n = 0;
      for (const sessionId of sessions) n += await redis.xlen(`${prefix}:{${sessionId}}:outbox`);
      return n;
    };
    try {
      // A kill aimed between commit and relay, aimed again (three times at most) until one landed there.
      for (let aim = 0; aim < 3 && betweenCommitAndRelay === 0; aim++) {
        await sleep(between(200, 600));
        const freezer = await freezeOnCommit(redisServer.port, prefix, runner!.pid);
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          freezer.commit,
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error('no commit within 20 s')), 20_000);
          }),
        ]).finally(() => {
          clearTimeout(timer);
          freezer.cancel();
        });
        // Frozen just after a commit script: rows still in an outbox are committed and not yet relayed.
        if ((await outboxed()) > 0) betweenCommitAndRelay += 1;
        await runner!.kill9();
        kills += 1;
        leftCommitted += await committedButNotRemoved();
        await startRunner();
      }
    } finally {
      going = false;
      await load;
    }

    // Every outbox relayed and removed, then the consumer at the topic's end: nothing more is coming.
    await waitFor('every outbox to be relayed', async () => (await outboxed()) === 0, 30_000);
    const ends = await admin.fetchTopicOffsets(TOPICS.contextRows);
    await waitFor(
      'the consumer to reach the topic end',
      () =>
        ends.every((o) => o.high === startedAt.get(o.partition) || (position.get(o.partition) ?? 0n) >= BigInt(o.high)),
      30_000,
    );

    // The committed rows, as the logs hold them, in log order per session.
    const checker = new ExactlyOnce('context-row events: one event per committed row');
    for (let k = 0; k < kills; k++) checker.fault('kill -9 session-runner');
    interface LogRow {
      seq: number;
      stepId: string;
      at: string;
      row: { id: string; kind: string; source: string; content?: string };
    }
    const rows = new Map<string, { sessionId: string; row: LogRow }>();
    for (const sessionId of sessions) {
      for (const json of await redis.lrange(`${prefix}:{${sessionId}}:log`, 0, -1)) {
        const entry = JSON.parse(json);
        if (entry.type !== 'row') continue;
        checker.sent(sessionId, entry.row.id);
        rows.set(entry.row.id, { sessionId, row: entry });
      }
    }

    // What the foreign consumer read: valid binary CloudEvents, valid against the AsyncAPI schema.
    const landed = new Map<string, string[]>();
    const first = new Map<string, Consumed>();
    const problems: unknown[] = [];
    let repeated = 0;
    for (const record of consumed) {
      const message: KafkaMessage<string> = {
        key: record.key,
        value: record.value,
        body: record.value,
        headers: record.headers,
      };
      const event = CloudEventsKafka.toEvent(message) as CloudEvent<Record<string, unknown>>;
      expect(event.validate()).toBe(true);
      if (!schemas.headers(record.headers)) problems.push({ headers: schemas.headers.errors });
      if (!schemas.payload(JSON.parse(record.value))) problems.push({ payload: schemas.payload.errors });
      landed.set(record.key, [...(landed.get(record.key) ?? []), event.id]);
      const earlier = first.get(event.id);
      if (earlier) {
        repeated += 1;
        // A repeated event is the same event: the same partition, key, value and headers.
        expect(record).toEqual(earlier);
        continue;
      }
      first.set(event.id, record);
      const committed = rows.get(event.id);
      if (!committed) continue; // reported as unexpected by the checker
      const { row } = committed;
      expect({ type: event.type, source: event.source, subject: event.subject, key: record.key }).toEqual({
        type: 'dev.ctxflow.context-row.v1',
        source: `/sessions/${committed.sessionId}`,
        subject: committed.sessionId,
        key: committed.sessionId,
      });
      expect(event.data).toMatchObject({
        sessionId: committed.sessionId,
        stepId: row.stepId,
        rowId: row.row.id,
        seq: row.seq,
        kind: row.row.kind,
        source: row.row.source,
        content: row.row.content,
        at: row.at,
      });
    }
    expect(problems.slice(0, 5)).toEqual([]);
    // The schemas are not vacuous: another event type, or a row kind that does not exist, is refused.
    const sample = consumed[0]!;
    expect(schemas.headers({ ...sample.headers, ce_type: 'dev.ctxflow.ticket.updated' })).toBe(false);
    expect(schemas.payload({ ...JSON.parse(sample.value), kind: 'secret' })).toBe(false);
    process.stdout.write(
      `[exactly-once] ${rows.size} committed rows, ${consumed.length} events read (${repeated} repeated), ` +
        `${kills} kill(s), ${betweenCommitAndRelay} between commit and relay, ${leftCommitted} entries committed ` +
        `to Kafka but left in the outbox at a kill; ${Date.now() - started} ms\n`,
    );
    // Every committed row once, none unknown, in log order per session.
    const report = checker.check(landed);
    expect(report.faults).toBeGreaterThanOrEqual(1);
    expect(betweenCommitAndRelay).toBeGreaterThan(0);
    // Exactly once on the topic: one record per committed row id, none repeated.
    expect({ repeated, records: consumed.length }).toEqual({ repeated: 0, records: rows.size });
    await runner!.stop();
  }, 120_000);
});
