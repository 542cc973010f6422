/**
 * The feed-ingestor's telemetry, in process: spans (SERVER per webhook,
 * PRODUCER per publish, trace context injected into the record headers),
 * ingest and refusal counters, and log lines that carry the trace id but
 * never a secret, a signature or a ticket body.
 */
import { Writable } from 'node:stream';
import { createLogger } from '@ctxflow/service-kit';
import { METRIC_FEED_INGESTED, METRIC_FEED_REFUSED } from '@ctxflow/telemetry';
import { context } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestTelemetry, type TestTelemetry } from '../../../../test/support/telemetry.ts';
import { feedApp, genericHeaders, NOW, SECRETS } from '../helpers.ts';

/** SpanKind numbers of the OpenTelemetry API. */
const SERVER = 1;
const PRODUCER = 3;

const SENDER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const SENDER_SPAN = '00f067aa0ba902b7';

describe('feed-ingestor telemetry', () => {
  let telemetry: TestTelemetry;
  // Spans nest through the active context: the AsyncLocalStorage manager, as startTelemetry registers it.
  const manager = new AsyncLocalStorageContextManager();
  beforeAll(() => {
    context.setGlobalContextManager(manager.enable());
  });
  afterAll(() => {
    context.disable();
  });
  beforeEach(() => {
    telemetry = createTestTelemetry();
  });
  afterEach(async () => {
    await telemetry.shutdown();
  });

  it('a webhook is a SERVER span continuing the sender trace; its publish a PRODUCER child whose context rides in the record headers', async () => {
    const { app, publisher } = await feedApp({ telemetry: telemetry.feedTelemetry });
    const body = JSON.stringify({ eventId: 'ev-1', ticket: 'T-9', summary: 'printer on fire' });
    const response = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: { ...genericHeaders(body), traceparent: `00-${SENDER_TRACE}-${SENDER_SPAN}-01` },
      payload: body,
    });
    expect(response.statusCode).toBe(202);

    const spans = await telemetry.spans();
    const ingest = spans.find((s) => s.name === 'ctxflow.webhook.ingest');
    const publish = spans.find((s) => s.name === 'ctxflow.update.publish');
    expect(ingest).toMatchObject({
      kind: SERVER,
      traceId: SENDER_TRACE,
      parentSpanId: SENDER_SPAN,
      attributes: {
        'ctxflow.feed.source': 'generic',
        'ctxflow.feed.event_id': 'generic:ev-1',
        'ctxflow.ticket': 'T-9',
      },
    });
    expect(publish).toMatchObject({ kind: PRODUCER, traceId: SENDER_TRACE, parentSpanId: ingest!.spanId });
    expect(publisher.published).toHaveLength(1);
    expect(publisher.published[0]!.record.headers).toEqual({
      'ctxflow-record-id': 'generic:ev-1',
      traceparent: `00-${SENDER_TRACE}-${publish!.spanId}-01`,
    });
    expect(await telemetry.metric(METRIC_FEED_INGESTED, { 'ctxflow.feed.source': 'generic' })).toBe(1);
    expect(await telemetry.metric(METRIC_FEED_REFUSED)).toBe(0);
    await app.close();
  });

  it('refusals are counted by source and reason (the error code); nothing is ingested', async () => {
    const { app, publisher } = await feedApp({ telemetry: telemetry.feedTelemetry });
    const body = JSON.stringify({ eventId: 'ev-2', ticket: 'T-9', summary: 's' });
    const forged = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: genericHeaders(body, Math.floor(NOW / 1000), 'not-the-secret'),
      payload: body,
    });
    expect(forged.statusCode).toBe(401);
    const garbage = '{"eventId":';
    const invalid = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: genericHeaders(garbage),
      payload: garbage,
    });
    expect(invalid.statusCode).toBe(400);
    const refused = (reason: string) =>
      telemetry.metric(METRIC_FEED_REFUSED, { 'ctxflow.feed.source': 'generic', 'ctxflow.feed.reason': reason });
    expect(await refused('unauthorized')).toBe(1);
    expect(await refused('validation_error')).toBe(1);
    expect(await telemetry.metric(METRIC_FEED_INGESTED)).toBe(0);
    expect(publisher.published).toEqual([]);
    const failed = (await telemetry.spans()).filter((s) => s.name === 'ctxflow.webhook.ingest');
    expect(failed.map((s) => s.statusCode)).toEqual([2, 2]);
    await app.close();
  });

  it('log lines carry the trace id of the webhook span and never the secret, a signature or the ticket body', async () => {
    const lines: Record<string, unknown>[] = [];
    let raw = '';
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        raw += chunk.toString('utf8');
        lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>);
        done();
      },
    });
    const logger = createLogger({ service: 'feed-ingestor', level: 'debug', destination });
    const { app } = await feedApp({ telemetry: telemetry.feedTelemetry, logger });
    const ticketBody = 'card number 4111 1111 1111 1111 in the ticket text';
    const body = JSON.stringify({ eventId: 'ev-3', ticket: 'T-10', summary: ticketBody });
    const headers = genericHeaders(body);
    const accepted = await app.inject({ method: 'POST', url: '/feeds/generic', headers, payload: body });
    expect(accepted.statusCode).toBe(202);
    const forgedHeaders = genericHeaders(body, Math.floor(NOW / 1000), 'not-the-secret');
    const refused = await app.inject({ method: 'POST', url: '/feeds/generic', headers: forgedHeaders, payload: body });
    expect(refused.statusCode).toBe(401);
    await app.close();

    const ingest = (await telemetry.spans()).find(
      (s) => s.name === 'ctxflow.webhook.ingest' && s.attributes['ctxflow.feed.event_id'] === 'generic:ev-3',
    );
    const acceptedLine = lines.find((l) => l.msg === 'feed delivery accepted');
    expect(acceptedLine).toMatchObject({ trace_id: ingest!.traceId, span_id: ingest!.spanId, id: 'generic:ev-3' });
    expect(lines.length).toBeGreaterThan(1);
    expect(raw).not.toContain(SECRETS.generic);
    expect(raw).not.toContain(headers['x-ctxflow-signature'].slice('sha256='.length));
    expect(raw).not.toContain(forgedHeaders['x-ctxflow-signature'].slice('sha256='.length));
    expect(raw).not.toContain(ticketBody);
  });
});
