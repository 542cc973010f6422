import { TOPICS } from '@ctxflow/contracts';
import type { TenantSecret } from '@ctxflow/feeds';
import { CloudEvent, HTTP } from 'cloudevents';
import { describe, expect, it } from 'vitest';
import { feedApp, hmacHex, NOW, RECEIVED_AT, SECRETS } from '../helpers.ts';

const CE_SECRET = 'cloudevents-test-secret-71d2';
const JIRA = 'https://jira.example.com';

/** The generic feed's signature headers over `body`, with `secret`. */
function signature(body: string, secret = CE_SECRET, timestampS = Math.floor(NOW / 1000)) {
  const ts = String(timestampS);
  return { 'x-ctxflow-timestamp': ts, 'x-ctxflow-signature': `sha256=${hmacHex(secret, ts, '.', body)}` };
}

/** One event's attributes (CloudEvents 1.0), overridable. */
function attributes(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    specversion: '1.0',
    id: 'evt-1',
    source: JIRA,
    type: 'dev.ctxflow.ticket.updated',
    subject: 'PROJ-7',
    time: '2024-05-01T09:30:00.000Z',
    datacontenttype: 'application/json',
    data: { summary: 'Customer replied: still broken', title: 'Login fails', url: `${JIRA}/browse/PROJ-7`, version: 3 },
    ...overrides,
  };
}

/** The update `attributes()` maps to, for `tenant`. */
function expectedUpdate(tenant = 'default', overrides: Record<string, unknown> = {}) {
  return {
    id: `cloudevents:${JIRA}:evt-1`,
    tenant,
    source: 'cloudevents',
    ticket: 'PROJ-7',
    scope: JIRA,
    eventId: 'evt-1',
    kind: 'updated',
    summary: 'Customer replied: still broken',
    title: 'Login fails',
    url: `${JIRA}/browse/PROJ-7`,
    version: 3,
    occurredAt: '2024-05-01T09:30:00.000Z',
    receivedAt: RECEIVED_AT,
    ...overrides,
  };
}

async function setup(
  secrets: Record<string, string | readonly TenantSecret[]> = { ...SECRETS, cloudevents: CE_SECRET },
) {
  const { app, publisher } = await feedApp({ secrets });
  const post = async (headers: Record<string, string>, body: string, secret = CE_SECRET) =>
    app.inject({
      method: 'POST',
      url: '/feeds/cloudevents',
      headers: { ...headers, ...signature(body, secret) },
      payload: body,
    });
  const structured = (event: Record<string, unknown>, secret?: string) =>
    post({ 'content-type': 'application/cloudevents+json' }, JSON.stringify(event), secret);
  const batch = (events: unknown[], secret?: string) =>
    post({ 'content-type': 'application/cloudevents-batch+json' }, JSON.stringify(events), secret);
  /** Binary mode: every attribute but data as a `ce-` header, the data as the body. */
  const binary = (event: Record<string, unknown>, secret?: string) => {
    const { data, datacontenttype, ...rest } = event;
    const headers: Record<string, string> = { 'content-type': String(datacontenttype ?? 'application/json') };
    for (const [name, value] of Object.entries(rest)) headers[`ce-${name}`] = String(value);
    return post(headers, typeof data === 'string' ? data : JSON.stringify(data), secret);
  };
  const updates = () => publisher.published.map((p) => JSON.parse(p.record.value));
  return { app, publisher, post, structured, binary, batch, updates };
}

describe('POST /feeds/cloudevents', () => {
  it('structured mode: a signed event is published once as a TicketUpdate keyed by its ticket', async () => {
    const { publisher, structured, updates } = await setup();
    const response = await structured(attributes());
    expect(response.statusCode).toBe(202);
    expect(response.json()).toEqual({ accepted: true, id: `cloudevents:${JIRA}:evt-1` });
    expect(updates()).toEqual([expectedUpdate()]);
    expect(publisher.published[0]!.topic).toBe(TOPICS.ticketUpdates);
    expect(publisher.published[0]!.record.key).toBe('cloudevents:PROJ-7');
    expect(publisher.published[0]!.record.headers?.['ctxflow-record-id']).toBe(`cloudevents:${JIRA}:evt-1`);
  });

  it('binary mode: ce-* headers and JSON data map to the same update; no time: occurredAt is the receipt', async () => {
    const { binary, updates } = await setup();
    const { time: _time, ...noTime } = attributes();
    const response = await binary(noTime);
    expect(response.statusCode).toBe(202);
    expect(updates()).toEqual([expectedUpdate('default', { occurredAt: RECEIVED_AT })]);
  });

  it('the SDK-made messages are accepted: HTTP.structured and HTTP.binary of a CloudEvent', async () => {
    const { post, updates } = await setup();
    const event = new CloudEvent({
      id: 'sdk-1',
      source: '/tracker',
      type: 'dev.ctxflow.ticket.commented',
      subject: 'T-1',
      data: { summary: 'from the SDK' },
    });
    for (const message of [HTTP.structured(event), HTTP.binary(event.cloneWith({ id: 'sdk-2' }))]) {
      const headers = Object.fromEntries(Object.entries(message.headers).map(([k, v]) => [k, String(v)]));
      expect((await post(headers, String(message.body))).statusCode).toBe(202);
    }
    expect(updates().map((u) => [u.id, u.kind, u.ticket, u.summary])).toEqual([
      ['cloudevents:/tracker:sdk-1', 'commented', 'T-1', 'from the SDK'],
      ['cloudevents:/tracker:sdk-2', 'commented', 'T-1', 'from the SDK'],
    ]);
  });

  it('batch mode: every event published once, per-event results; the same batch again is all duplicates', async () => {
    const { batch, updates } = await setup();
    const events = [attributes(), attributes({ id: 'evt-2', subject: 'PROJ-8', type: 'dev.ctxflow.ticket.status' })];
    const first = await batch(events);
    expect(first.statusCode).toBe(202);
    expect(first.json()).toEqual({
      accepted: true,
      results: [{ id: `cloudevents:${JIRA}:evt-1` }, { id: `cloudevents:${JIRA}:evt-2` }],
    });
    expect(updates().map((u) => [u.id, u.ticket, u.kind])).toEqual([
      [`cloudevents:${JIRA}:evt-1`, 'PROJ-7', 'updated'],
      [`cloudevents:${JIRA}:evt-2`, 'PROJ-8', 'status'],
    ]);
    const again = await batch(events);
    expect(again.json()).toEqual({
      accepted: true,
      results: [
        { id: `cloudevents:${JIRA}:evt-1`, duplicate: true },
        { id: `cloudevents:${JIRA}:evt-2`, duplicate: true },
      ],
    });
    expect(updates()).toHaveLength(2);
  });

  it('batch mode is all or nothing: one invalid event refuses the batch, naming it; nothing is published', async () => {
    const { batch, publisher } = await setup();
    const response = await batch([attributes(), attributes({ id: 'evt-2', type: 'com.example.build.finished' })]);
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toMatchObject({ code: 'validation_error', retryable: false });
    expect(response.json().error.message).toBe(
      'events[1].type: not accepted (expected dev.ctxflow.ticket.<kind>, e.g. dev.ctxflow.ticket.updated)',
    );
    expect((await batch([])).json().error.message).toBe('body: the batch has no events');
    expect((await batch([attributes(), 'x'])).json().error.message).toBe('events[1].expected a JSON object');
    expect(publisher.published).toEqual([]);
  });

  it('a duplicate id is published once, whichever mode repeats it', async () => {
    const { structured, binary, batch, updates } = await setup();
    expect((await structured(attributes())).json().duplicate).toBeUndefined();
    expect((await binary(attributes())).json()).toEqual({
      accepted: true,
      id: `cloudevents:${JIRA}:evt-1`,
      duplicate: true,
    });
    expect((await batch([attributes()])).json().results).toEqual([
      { id: `cloudevents:${JIRA}:evt-1`, duplicate: true },
    ]);
    // The same id from another source is another event (CloudEvents: source + id is unique).
    expect((await structured(attributes({ source: '/other' }))).json().duplicate).toBeUndefined();
    expect(updates().map((u) => u.id)).toEqual([`cloudevents:${JIRA}:evt-1`, 'cloudevents:/other:evt-1']);
  });

  it('400 validation_error naming the attribute: missing specversion/id/source/type, unknown type, bad data', async () => {
    const { structured, binary, publisher } = await setup();
    const message = async (response: Promise<{ statusCode: number; json(): any }>) => {
      const r = await response;
      expect(r.statusCode).toBe(400);
      expect(r.json().error.code).toBe('validation_error');
      return r.json().error.message as string;
    };
    for (const name of ['specversion', 'id', 'source', 'type']) {
      const { [name]: _gone, ...event } = attributes();
      expect(await message(structured(event))).toBe(`${name}: required (a non-empty string)`);
      expect(await message(binary(event))).toBe(`${name}: required (a non-empty string)`);
    }
    expect(await message(structured(attributes({ specversion: '0.3' })))).toBe('specversion: expected "1.0"');
    expect(await message(structured(attributes({ type: 'com.example.other' })))).toBe(
      'type: not accepted (expected dev.ctxflow.ticket.<kind>, e.g. dev.ctxflow.ticket.updated)',
    );
    expect(await message(structured(attributes({ subject: undefined })))).toBe(
      'subject: required: the ticket the event is about',
    );
    expect(await message(structured(attributes({ time: 'yesterday' })))).toMatch(/^time: /);
    expect(await message(structured(attributes({ data: 'plain text' })))).toMatch(/^data: expected a JSON object/);
    expect(await message(structured(attributes({ data: { summary: 'x', version: -1 } })))).toMatch(/^data\.version: /);
    expect(await message(structured(attributes({ data: { url: 'x' } })))).toBe('data.summary: needs summary or title');
    expect(await message(binary({ ...attributes(), data: '{"summary": ' }))).toBe('data: not valid JSON');
    expect(await message(binary({ ...attributes(), datacontenttype: 'text/plain', data: 'hi' }))).toMatch(
      /^content-type: expected application\/json, application\/cloudevents\+json, application\/cloudevents-batch\+json/,
    );
    expect(publisher.published).toEqual([]);
  });

  it('401 for a bad or stale signature, 413 over the body limit, 404 feed_disabled without a secret', async () => {
    const { structured, post, app, publisher } = await setup();
    const wrong = await structured(attributes(), 'not-the-secret');
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json().error.code).toBe('unauthorized');
    const body = JSON.stringify(attributes());
    const stale = await app.inject({
      method: 'POST',
      url: '/feeds/cloudevents',
      headers: { 'content-type': 'application/cloudevents+json', ...signature(body, CE_SECRET, NOW / 1000 - 301) },
      payload: body,
    });
    expect(stale.statusCode).toBe(401);
    expect(stale.json().error.message).toBe('x-ctxflow-timestamp: older than 300 s');
    const big = JSON.stringify(attributes({ data: { summary: 'x'.repeat(300 * 1024) } }));
    const tooLarge = await post({ 'content-type': 'application/cloudevents+json' }, big);
    expect(tooLarge.statusCode).toBe(413);
    expect(tooLarge.json().error.code).toBe('payload_too_large');
    expect(publisher.published).toEqual([]);
    const off = await setup({ ...SECRETS });
    const disabled = await off.structured(attributes());
    expect(disabled.statusCode).toBe(404);
    expect(disabled.json().error.code).toBe('feed_disabled');
  });

  it("tenant-scoped: each tenant's secret tags its updates; the same event of two tenants is published for both", async () => {
    const pairs: TenantSecret[] = [
      { tenant: 'ta', secret: 'ta-ce-secret' },
      { tenant: 'tb', secret: 'tb-ce-secret' },
    ];
    const { structured, batch, updates } = await setup({ cloudevents: pairs });
    expect((await structured(attributes(), 'ta-ce-secret')).statusCode).toBe(202);
    expect((await batch([attributes()], 'tb-ce-secret')).json().results).toEqual([{ id: `cloudevents:${JIRA}:evt-1` }]);
    expect((await structured(attributes(), 'ta-ce-secret')).json().duplicate).toBe(true);
    expect(updates()).toEqual([expectedUpdate('ta'), expectedUpdate('tb')]);
    expect((await structured(attributes(), 'tc-ce-secret')).statusCode).toBe(401);
  });

  it('the other feeds refuse CloudEvents media types (400), publishing nothing', async () => {
    const { app, publisher } = await setup();
    const body = JSON.stringify({ eventId: 'e1', ticket: 'T-1', summary: 's' });
    const ts = String(Math.floor(NOW / 1000));
    const response = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: {
        'content-type': 'application/cloudevents+json',
        'x-ctxflow-timestamp': ts,
        'x-ctxflow-signature': `sha256=${hmacHex(SECRETS.generic, ts, '.', body)}`,
      },
      payload: body,
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().error.message).toBe('content-type: expected application/json');
    expect(publisher.published).toEqual([]);
  });

  it('batch mode: a bus failure part-way is 503; the retry publishes only the events not yet published', async () => {
    const { app, publisher } = await feedApp({ secrets: { cloudevents: CE_SECRET } });
    const events = [attributes(), attributes({ id: 'evt-2' }), attributes({ id: 'evt-3' })];
    const body = JSON.stringify(events);
    const send = () =>
      app.inject({
        method: 'POST',
        url: '/feeds/cloudevents',
        headers: { 'content-type': 'application/cloudevents-batch+json', ...signature(body) },
        payload: body,
      });
    // The bus acknowledges the first event, then is down.
    const publish = publisher.publish.bind(publisher);
    publisher.publish = async (topic, records) => {
      await publish(topic, records);
      publisher.failing = true;
    };
    const failed = await send();
    expect(failed.statusCode).toBe(503);
    expect(failed.json().error.code).toBe('bus_unavailable');
    expect(failed.headers['retry-after']).toBe('5');
    publisher.publish = publish;
    publisher.failing = false;
    const retried = await send();
    expect(retried.json().results).toEqual([
      { id: `cloudevents:${JIRA}:evt-1`, duplicate: true },
      { id: `cloudevents:${JIRA}:evt-2` },
      { id: `cloudevents:${JIRA}:evt-3` },
    ]);
    expect(publisher.published.map((p) => JSON.parse(p.record.value).eventId)).toEqual(['evt-1', 'evt-2', 'evt-3']);
  });

  it('batch mode takes at most 100 events', async () => {
    const { batch, publisher } = await setup();
    const events = Array.from({ length: 101 }, (_, i) => attributes({ id: `evt-${i}` }));
    const response = await batch(events);
    expect(response.statusCode).toBe(400);
    expect(response.json().error.message).toBe('body: more than 100 events in one batch');
    expect((await batch(events.slice(0, 100))).json().results).toHaveLength(100);
    expect(publisher.published).toHaveLength(100);
  });
});
