/**
 * docs/asyncapi.yaml: generated from the zod schemas (never stale), a valid
 * AsyncAPI 3.0 document for @asyncapi/parser, and its schemas accept the
 * records the services really publish on Kafka (feed-ingestor's updates,
 * session-runner's results, both dead-letter topics and replay markers).
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { Parser } from '@asyncapi/parser';
import { createBus, type IncomingRecord, readTopic } from '@ctxflow/bus';
import { DEFAULT_TENANT, DLQ_HEADERS, FEED_SOURCES, TOPICS } from '@ctxflow/contracts';
import { createEngine, MemorySessionStore, startStepRequestConsumer } from '@ctxflow/session-runner';
import { MemoryFeedStreams, StepContextService } from '@ctxflow/step-context';
import { MemorySubscriptionStore } from '@ctxflow/subscriptions';
import { Ajv } from 'ajv';
import kafkajs from 'kafkajs';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ASYNCAPI_PATH, renderAsyncApi } from '../../scripts/asyncapi.ts';
import { replayDeadLetters } from '../../scripts/dlq.ts';
import { eventually } from '../../services/step-context/test/helpers.ts';
import { feedApp, fixture, genericHeaders } from '../../shared/feeds/test/helpers.ts';
import { requireKafka } from '../support/services.ts';

const text = readFileSync(ASYNCAPI_PATH, 'utf8');
const doc = parse(text);

const run = randomUUID().slice(0, 8);
const prefix = `ctxflow-test-asyncapi-${run}.`;
const cleanups: (() => Promise<unknown>)[] = [];

afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  if (!process.env.KAFKA_BROKERS) return;
  const admin = new kafkajs.Kafka({ clientId: 'ctxflow-test-cleanup', brokers: requireKafka(), logLevel: 0 }).admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const ours = Object.values(TOPICS)
      .map((t) => `${prefix}${t}`)
      .filter((n) => existing.has(n));
    if (ours.length > 0) await admin.deleteTopics({ topics: ours });
  } finally {
    await admin.disconnect();
  }
});

describe('AsyncAPI document (docs/asyncapi.yaml)', () => {
  it('ASYNC1: is exactly what scripts/asyncapi.ts generates from the zod schemas (--check passes)', async () => {
    expect(text).toBe(renderAsyncApi());
    await expect(promisify(execFile)(process.execPath, ['scripts/asyncapi.ts', '--check'])).resolves.toMatchObject({
      stderr: '',
    });
  });

  it('ASYNC2: parses with @asyncapi/parser without errors or warnings; one channel per topic, keys and headers named', async () => {
    const { document, diagnostics } = await new Parser().parse(text);
    // Neither errors (0) nor warnings (1); only the hint that AsyncAPI 3.1 exists remains.
    expect(diagnostics.filter((d) => d.severity <= 1)).toEqual([]);
    expect(document).toBeDefined();
    expect(document!.version()).toBe('3.0.0');
    const addresses = document!
      .channels()
      .all()
      .map((c) => c.address());
    expect(addresses.sort()).toEqual(Object.values(TOPICS).sort());
    for (const message of document!.messages().all()) {
      expect(message.bindings().has('kafka')).toBe(true);
      expect(message.hasHeaders()).toBe(true);
    }
    expect(Object.keys(doc.components.schemas.DeadLetterHeaders.properties)).toEqual(
      expect.arrayContaining([
        'ctxflow-dlq-reason',
        'ctxflow-dlq-error',
        'ctxflow-dlq-topic',
        'ctxflow-dlq-partition',
        'ctxflow-dlq-offset',
      ]),
    );
    expect(doc.info.description).toContain('ctxflow-record-id');
    expect(doc.info.description).toContain('.v<N>');
    // Every built-in feed is named as a source of ticket updates.
    expect(doc.components.schemas.TicketUpdate.properties.source.examples).toEqual([...FEED_SOURCES]);
  });

  it('ASYNC3: the schemas accept the records the services publish on Kafka, and refuse a broken one', async () => {
    const brokers = requireKafka();
    const bus = createBus({ client: 'kafkajs', clientId: `asyncapi-test-${run}`, brokers, topicPrefix: prefix });
    cleanups.push(
      () => bus.admin.close(),
      () => bus.publisher.close(),
    );
    await bus.admin.ensureTopics(Object.values(TOPICS).map((name) => ({ name, partitions: 2 })));

    // feed-ingestor: a signed generic webhook, published through its own routes.
    const { app } = await feedApp({ publisher: bus.publisher });
    cleanups.push(() => app.close());
    const body = fixture('generic-update.json');
    const accepted = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: genericHeaders(body),
      payload: body,
    });
    expect(accepted.statusCode).toBeLessThan(300);

    // step-context dead-letters a poison update.
    const stepContext = new StepContextService({
      subscriber: bus.subscriber,
      deadLetters: bus.publisher,
      feedStreams: new MemoryFeedStreams(),
      subscriptions: new MemorySubscriptionStore(),
    });
    await stepContext.start();
    cleanups.push(() => stepContext.stop());
    await bus.publisher.publish(TOPICS.ticketUpdates, [{ key: 'generic:X', value: '{"summary":1}' }]);

    // session-runner answers a step (ok), refuses one (and dead-letters it), dead-letters bytes that are not JSON.
    const store = new MemorySessionStore();
    const engine = createEngine({ store });
    const session = await engine.createSession(DEFAULT_TENANT, {});
    await engine.addContext(DEFAULT_TENANT, {
      sessionId: session.sessionId,
      items: [{ kind: 'notice', content: 'n' }],
    });
    const consumer = await startStepRequestConsumer({
      engine,
      store,
      subscriber: bus.subscriber,
      publisher: bus.publisher,
    });
    cleanups.push(() => consumer.close());
    await bus.publisher.publish(TOPICS.stepRequests, [
      { key: session.sessionId, value: JSON.stringify({ sessionId: session.sessionId, requestId: `ok-${run}` }) },
      { key: 'ses_none', value: JSON.stringify({ sessionId: 'ses_none', requestId: `no-${run}` }) },
      { key: 'ses_none', value: 'not json' },
    ]);
    const read = (topic: string) => readTopic({ brokers, clientId: 'asyncapi-test' }, `${prefix}${topic}`);
    await eventually(async () => expect(await read(TOPICS.stepResults)).toHaveLength(2), 60_000);
    await eventually(async () => expect(await read(TOPICS.stepRequestsDlq)).toHaveLength(2), 30_000);
    await eventually(async () => expect(await read(TOPICS.ticketUpdatesDlq)).toHaveLength(1), 30_000);
    // A replay writes a marker onto the dead-letter topic.
    await replayDeadLetters({ brokers, topicPrefix: prefix, topics: ['ticket-updates'] });

    const ajv = new Ajv({ strict: false, allErrors: true });
    const schemas = doc.components.schemas;
    const messages = doc.components.messages;
    const validate = (schema: object, value: unknown) => {
      const check = ajv.compile(schema);
      return check(value) ? [] : check.errors;
    };
    /** Checks one record against a message of the document: headers, key type, payload. */
    const checkRecord = (name: string, r: IncomingRecord) => {
      const m = messages[name];
      const headersSchema = schemas[m.headers.$ref.split('/').at(-1)];
      const payloadSchema = m.payload.$ref ? schemas[m.payload.$ref.split('/').at(-1)] : m.payload;
      const value = (m.contentType ?? doc.defaultContentType) === 'application/json' ? JSON.parse(r.value) : r.value;
      return {
        name,
        headers: validate(headersSchema, r.headers),
        key: validate(m.bindings.kafka.key, r.key),
        payload: validate(payloadSchema, value),
      };
    };
    const ok = (name: string) => ({ name, headers: [], key: [], payload: [] });
    const checked: unknown[] = [];
    const expected: unknown[] = [];
    const updates = await read(TOPICS.ticketUpdates);
    // The feed's update, then the poison (which only the DLQ schema describes), then the replayed poison.
    const fromFeed = updates.filter((r) => r.headers['ctxflow-record-id'] !== undefined);
    expect(fromFeed).toHaveLength(1);
    for (const r of fromFeed) {
      checked.push(checkRecord('TicketUpdate', r));
      expected.push(ok('TicketUpdate'));
    }
    for (const r of await read(TOPICS.stepResults)) {
      checked.push(checkRecord('StepResult', r));
      expected.push(ok('StepResult'));
    }
    expect((await read(TOPICS.stepResults)).map((r) => JSON.parse(r.value).ok).sort()).toEqual([false, true]);
    const letters = [...(await read(TOPICS.ticketUpdatesDlq)), ...(await read(TOPICS.stepRequestsDlq))];
    for (const r of letters) {
      const isMarker = r.headers[DLQ_HEADERS.replayed] !== undefined;
      const name = isMarker
        ? 'ReplayMarker'
        : r.topic.endsWith(TOPICS.ticketUpdatesDlq)
          ? 'TicketUpdateDeadLetter'
          : 'StepRequestDeadLetter';
      checked.push(checkRecord(name, r));
      expected.push(ok(name));
    }
    expect(letters.filter((r) => r.headers[DLQ_HEADERS.replayed] !== undefined)).toHaveLength(1);
    expect(checked).toEqual(expected);
    // The schemas are not vacuous: a result without its requestId, or a bad reason, is refused.
    const result = JSON.parse((await read(TOPICS.stepResults))[0]!.value);
    delete result.requestId;
    expect(validate(schemas.StepResult, result)).not.toEqual([]);
    expect(validate(schemas.DeadLetterHeaders, { ...letters[0]!.headers, [DLQ_HEADERS.reason]: 'other' })).not.toEqual(
      [],
    );
  }, 180_000);
});
