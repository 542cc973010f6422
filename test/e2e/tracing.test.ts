/**
 * Tracing end to end on real Kafka and Redis: the three services as child
 * processes exporting OTLP/HTTP JSON to an in-process receiver.
 *
 * One signed webhook yields one trace: the feed-ingestor's SERVER span and its
 * PRODUCER publish span, step-context's CONSUMER apply span (child of the
 * publish span through the record's `traceparent` header); the
 * session-runner's context pass that commits the notice row is LINKED to the
 * apply span (fan-in: one pass may deliver many updates, each from its own
 * trace). An agent whose HTTP hook fails yields a `core.context.skipped` log
 * record with reason hook_error. Logs carry the trace id; neither the feed
 * secret, the signature nor the ticket's text reaches a log line.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { TOPICS } from '@ctxflow/contracts';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import {
  deletePrefix,
  ENTRIES,
  freePort,
  SESSION_TIMEOUT_MS,
  ServiceProcess,
  serviceEnv,
  startGroupsAtEnd,
  stopAll,
  waitFor,
} from '../faults/processes.ts';
import { OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.ts';
import { requireKafka, requireRedis } from '../support/services.ts';

/** OTLP SpanKind numbers. */
const SERVER = 2;
const PRODUCER = 4;
const CONSUMER = 5;

async function postJson(url: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

describe('tracing across feed-ingestor, step-context and session-runner', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    await stopAll();
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  });

  it('one signed webhook is one trace through Kafka to the linked context pass; a failing hook is a core.context.skipped log record', async () => {
    const brokers = requireKafka();
    const redisUrl = requireRedis();
    const run = `trace-${randomUUID().slice(0, 8)}`;
    const prefix = `test:${run}`;
    const secret = `feed-secret-${randomUUID()}`;
    const ticketText = `customer wrote: the invoice ${randomUUID()} is wrong`;
    const ticket = `${run}-T1`;

    const receiver = await OtlpReceiver.start();
    cleanups.push(() => receiver.close());
    const redis = new Redis(redisUrl);
    cleanups.push(async () => {
      await deletePrefix(redis, prefix);
      redis.disconnect();
    });

    const runnerGroup = `${run}-runner`;
    const stepContextGroup = `${run}-step-context`;
    await startGroupsAtEnd(brokers, [
      { groupId: runnerGroup, topic: TOPICS.stepRequests },
      { groupId: stepContextGroup, topic: TOPICS.ticketUpdates },
    ]);
    const [runnerPort, stepContextPort, feedPort, deadHookPort] = await Promise.all([
      freePort(),
      freePort(),
      freePort(),
      freePort(),
    ]);
    const common = {
      KAFKA_BROKERS: brokers.join(','),
      REDIS_URL: redisUrl,
      CTXFLOW_REDIS_PREFIX: prefix,
      KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_METRIC_EXPORT_INTERVAL: '1000',
    };
    const runner = new ServiceProcess({
      name: 'session-runner',
      entry: ENTRIES.runner,
      port: runnerPort,
      env: serviceEnv({
        ...common,
        CTXFLOW_PORT: String(runnerPort),
        CTXFLOW_RUNNER_GROUP: runnerGroup,
        CTXFLOW_STEP_CONTEXT_URL: `http://127.0.0.1:${stepContextPort}/step-context`,
      }),
    });
    const stepContext = new ServiceProcess({
      name: 'step-context',
      entry: ENTRIES.stepContext,
      port: stepContextPort,
      env: serviceEnv({
        ...common,
        CTXFLOW_STEP_CONTEXT_PORT: String(stepContextPort),
        CTXFLOW_STEP_CONTEXT_GROUP: stepContextGroup,
      }),
    });
    const feed = new ServiceProcess({
      name: 'feed-ingestor',
      entry: ENTRIES.feedIngestor,
      port: feedPort,
      env: serviceEnv({ ...common, CTXFLOW_FEED_PORT: String(feedPort), CTXFLOW_FEED_SECRET_GENERIC: secret }),
    });
    await Promise.all([runner.start(), stepContext.start(), feed.start()]);
    const runnerUrl = `http://127.0.0.1:${runnerPort}`;

    // Every service is ready (Kafka, Redis, consumers) and serves Prometheus text.
    for (const port of [runnerPort, stepContextPort, feedPort]) {
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(ready.status).toBe(200);
      const metrics = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(metrics.status).toBe(200);
      expect(metrics.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    }

    // A session of an agent on the ticket feed, subscribed to the ticket.
    const agent = await postJson(`${runnerUrl}/agents`, {});
    expect(agent.status).toBe(201);
    const session = await postJson(`${runnerUrl}/sessions`, { agentId: agent.body.agentId });
    expect(session.status).toBe(201);
    const sessionId = String(session.body.sessionId);
    const subscribed = await postJson(`http://127.0.0.1:${stepContextPort}/sessions/${sessionId}/subscriptions`, {
      source: 'generic',
      ticket,
    });
    expect(subscribed.status).toBe(201);

    // ONE signed webhook.
    const eventId = `${run}-e1`;
    const updateId = `generic:${eventId}`; // the TicketUpdate id: source and delivery id
    const raw = JSON.stringify({ eventId, ticket, summary: ticketText, title: 'Invoice' });
    const timestamp = String(Math.floor(Date.now() / 1000));
    const signature = createHmac('sha256', secret).update(`${timestamp}.${raw}`).digest('hex');
    const delivered = await fetch(`http://127.0.0.1:${feedPort}/feeds/generic`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-ctxflow-timestamp': timestamp,
        'x-ctxflow-signature': `sha256=${signature}`,
      },
      body: raw,
    });
    expect(delivered.status).toBe(202);
    // A refused delivery (bad signature) is counted by reason, and its signature is not logged either.
    const forged = await fetch(`http://127.0.0.1:${feedPort}/feeds/generic`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-ctxflow-timestamp': timestamp,
        'x-ctxflow-signature': `sha256=${'ab'.repeat(32)}`,
      },
      body: raw,
    });
    expect(forged.status).toBe(401);

    // Steps over HTTP until one commits the hook's notice row.
    const step = await waitFor(
      'a step that commits the notice row of the webhook',
      async () => {
        const answer = await postJson(`${runnerUrl}/sessions/${sessionId}/steps`, {});
        expect(answer.status).toBe(200);
        const rows = answer.body.rows as { source: string; content?: string }[];
        return rows.some((r) => r.source === 'hook' && r.content?.includes(ticket)) ? answer.body : undefined;
      },
      30_000,
      300,
    );
    const stepId = String(step.stepId);

    // An agent whose HTTP hook fails (nothing listens there): the step goes on, the hook is skipped.
    const failing = await postJson(`${runnerUrl}/agents`, {
      stepContext: { url: `http://127.0.0.1:${deadHookPort}/hook`, timeoutMs: 2_000 },
    });
    const failingSession = await postJson(`${runnerUrl}/sessions`, { agentId: failing.body.agentId });
    const skippedStep = await postJson(`${runnerUrl}/sessions/${String(failingSession.body.sessionId)}/steps`, {});
    expect(skippedStep.status).toBe(200);
    expect((skippedStep.body.skipped as { reason: string }[]).map((s) => s.reason)).toEqual(['hook_error']);

    const feedMetrics = await (await fetch(`http://127.0.0.1:${feedPort}/metrics`)).text();
    expect(feedMetrics).toMatch(/ctxflow_feed_ingested_total\{[^}]*ctxflow_feed_source="generic"[^}]*\} 1/);
    expect(feedMetrics).toMatch(
      /ctxflow_feed_refused_total\{[^}]*ctxflow_feed_reason="unauthorized"[^}]*\} 1|ctxflow_feed_refused_total\{[^}]*ctxflow_feed_source="generic"[^}]*ctxflow_feed_reason="unauthorized"[^}]*\} 1/,
    );
    // Consumer lag of step-context's group, from the partition end the bus reported with the update.
    const stepContextMetrics = await (await fetch(`http://127.0.0.1:${stepContextPort}/metrics`)).text();
    expect(stepContextMetrics).toMatch(
      new RegExp(`ctxflow_consumer_lag\\{[^}]*ctxflow_consumer_group="${stepContextGroup}"[^}]*\\} \\d+`),
    );
    const runnerMetrics = await (await fetch(`${runnerUrl}/metrics`)).text();
    expect(runnerMetrics).toMatch(/ctxflow_context_rows_total\{[^}]*ctxflow_row_kind="notice"[^}]*\} 1/);
    expect(runnerMetrics).toMatch(/ctxflow_context_skipped_total\{[^}]*ctxflow_skip_reason="hook_error"[^}]*\} 1/);
    expect(runnerMetrics).toMatch(/ctxflow_context_pass_duration_count\{[^}]*\} \d+/);
    expect(runnerMetrics).toMatch(/ctxflow_prompt_prefix_reused_bytes_count\{[^}]*\} \d+/);

    // SIGTERM each: the shutdown flushes every span and log record still batched.
    await Promise.all([feed.stop(), stepContext.stop(), runner.stop()]);
    for (const service of [feed, stepContext, runner]) {
      expect(service.logs.some((l) => l.msg === `${service.name}: stopped` && l.failed === false)).toBe(true);
    }
    expect(receiver.refused).toEqual([]);

    // One trace: the webhook (SERVER) -> publish (PRODUCER) -> apply (CONSUMER).
    const ingest = receiver.spans.filter(
      (s) => s.name === 'ctxflow.webhook.ingest' && s.attributes['ctxflow.feed.event_id'] === updateId,
    );
    expect(ingest).toHaveLength(1);
    const traceId = ingest[0]!.traceId;
    const inTrace = receiver.spans.filter((s) => s.traceId === traceId);
    const byName = (name: string) => inTrace.filter((s) => s.name === name);
    const [server, publish, apply] = [
      byName('ctxflow.webhook.ingest'),
      byName('ctxflow.update.publish'),
      byName('ctxflow.step_context.apply'),
    ];
    expect([server.length, publish.length, apply.length]).toEqual([1, 1, 1]);
    expect(server[0]).toMatchObject({ service: 'ctxflow-feed-ingestor', kind: SERVER, parentSpanId: undefined });
    expect(publish[0]).toMatchObject({
      service: 'ctxflow-feed-ingestor',
      kind: PRODUCER,
      parentSpanId: server[0]!.spanId,
    });
    expect(apply[0]).toMatchObject({
      service: 'ctxflow-step-context',
      kind: CONSUMER,
      parentSpanId: publish[0]!.spanId,
      attributes: expect.objectContaining({ 'ctxflow.ticket': ticket }),
    });

    // The context pass that committed the row is linked to the apply span of that trace.
    const passes = receiver.spans.filter(
      (s): s is ReceivedSpan => s.name === 'ctxflow.context_pass' && s.attributes['ctxflow.step_id'] === stepId,
    );
    expect(passes).toHaveLength(1);
    expect(passes[0]).toMatchObject({ service: 'ctxflow-session-runner' });
    expect(passes[0]!.links).toEqual([{ traceId, spanId: apply[0]!.spanId }]);
    // ... and its store commit is its child.
    const commits = receiver.spans.filter(
      (s) => s.name === 'ctxflow.store.commit' && s.parentSpanId === passes[0]!.spanId,
    );
    expect(commits).toHaveLength(1);
    // The webhook's own trace ends in the session-runner: a delivery span, child of the apply
    // span, linked to the committing pass.
    const deliver = byName('ctxflow.context.deliver');
    expect(deliver).toHaveLength(1);
    expect(deliver[0]).toMatchObject({
      service: 'ctxflow-session-runner',
      kind: CONSUMER,
      parentSpanId: apply[0]!.spanId,
      links: [{ traceId: passes[0]!.traceId, spanId: passes[0]!.spanId }],
    });
    expect(new Set(inTrace.map((s) => s.service))).toEqual(
      new Set(['ctxflow-feed-ingestor', 'ctxflow-step-context', 'ctxflow-session-runner']),
    );

    // The failing hook: one core.context.skipped log record, reason hook_error, inside its pass's span.
    const skipped = receiver.logs.filter(
      (r) =>
        r.eventName === 'core.context.skipped' &&
        r.attributes['ctxflow.session_id'] === String(failingSession.body.sessionId),
    );
    expect(skipped).toHaveLength(1);
    expect(skipped[0]).toMatchObject({
      service: 'ctxflow-session-runner',
      severityNumber: 13,
      attributes: expect.objectContaining({ 'ctxflow.skip.reason': 'hook_error' }),
    });
    const skippedPass = receiver.spans.find(
      (s) => s.name === 'ctxflow.context_pass' && s.spanId === skipped[0]!.spanId,
    );
    expect(skippedPass?.traceId).toBe(skipped[0]!.traceId);

    // Metrics reached the receiver too.
    expect(
      receiver.metrics.some((m) => m.service === 'ctxflow-feed-ingestor' && m.name === 'ctxflow.feed.ingested'),
    ).toBe(true);

    // pino lines carry the trace: the accepted delivery is logged inside the webhook's span.
    const accepted = feed.logs.filter((l) => l.msg === 'feed delivery accepted' && l.id === updateId);
    expect(accepted).toHaveLength(1);
    expect(accepted[0]).toMatchObject({ trace_id: traceId, span_id: server[0]!.spanId });
    const applied = stepContext.logs.filter((l) => l.msg === 'ticket update applied' && l.updateId === updateId);
    expect(applied).toHaveLength(1);
    expect(applied[0]).toMatchObject({ trace_id: traceId, span_id: apply[0]!.spanId });

    // Neither the secret, a signature nor the ticket's text reaches any log line of any service.
    const everything = [feed, stepContext, runner]
      .flatMap((s) => [...s.logs.map((l) => JSON.stringify(l)), ...s.stderr])
      .join('\n');
    expect(everything).not.toContain(secret);
    expect(everything).not.toContain(signature);
    expect(everything).not.toContain('ab'.repeat(32));
    expect(everything).not.toContain(ticketText);
    expect(receiver.logs.map((r) => JSON.stringify(r)).join('\n')).not.toContain(ticketText);
  }, 120_000);
});
