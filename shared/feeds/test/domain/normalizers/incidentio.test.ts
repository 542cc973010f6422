/**
 * incident.io deliveries through `POST /feeds/incidentio`, signed by the
 * `standardwebhooks` package. Fixtures: the envelope `{ event_type,
 * <event_type>: payload }` of incident.io's webhook reference
 * (docs.incident.io/api-reference, "Webhooks"), the incident the IncidentV2
 * example of incident.io's OpenAPI document (github.com/incident-io/sdk-python,
 * openapi.json: "Our database is sad", INC-123). The updated event raises the
 * severity and the status event moves Triage to Fixing (values of the same
 * schemas) so each delivery says something of its own; the private-incident
 * event is the documented `{ id }` only, the follow-up event the
 * follow_up_updated_v1 example as published.
 */
import { TOPICS } from '@ctxflow/contracts';
import { describe, expect, it } from 'vitest';
import { feedApp, fixture, RECEIVED_AT, SECRETS, standardHeaders } from '../../helpers.ts';

const post = async (app: Awaited<ReturnType<typeof feedApp>>['app'], name: string, id: string) => {
  const body = fixture(name);
  return app.inject({
    method: 'POST',
    url: '/feeds/incidentio',
    headers: standardHeaders(body, id, SECRETS.incidentio),
    payload: body,
  });
};

const base = {
  source: 'incidentio',
  ticket: 'INC-123',
  title: 'Our database is sad',
  url: 'https://app.incident.io/incidents/123',
  receivedAt: RECEIVED_AT,
  tenant: 'default',
};
const SUMMARY = "Our database is really really sad, and we don't know why yet.";

describe('incident.io feed', () => {
  it.each([
    {
      fixture: 'incidentio-incident-created.json',
      id: 'msg_2Zx9created',
      expected: {
        kind: 'created',
        summary: `Incident INC-123 created: Our database is sad (status Triage, severity Minor)\n\n${SUMMARY}`,
        author: 'Lisa Karlin Curtis',
        occurredAt: '2021-08-17T13:28:57.801578Z',
      },
    },
    {
      fixture: 'incidentio-incident-updated.json',
      id: 'msg_2Zx9updated',
      expected: {
        kind: 'updated',
        summary: `Incident INC-123 updated: Our database is sad (status Triage, severity Major)\n\n${SUMMARY}`,
        occurredAt: '2021-08-17T14:02:11.120000Z',
      },
    },
    {
      fixture: 'incidentio-incident-status-updated.json',
      id: 'msg_2Zx9status',
      expected: {
        kind: 'status',
        summary: `Incident INC-123 status changed: "Triage" -> "Fixing": Our database is sad\n\n${SUMMARY}`,
        occurredAt: '2021-08-17T14:30:05.000000Z',
        changes: [{ field: 'status', from: 'Triage', to: 'Fixing' }],
      },
    },
  ])('$fixture -> one TicketUpdate of INC-123, event id the webhook-id', async ({ fixture: name, id, expected }) => {
    const { app, publisher } = await feedApp();
    const res = await post(app, name, id);
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ accepted: true, id: `incidentio:${id}` });
    expect(publisher.published).toHaveLength(1);
    const [{ topic, record }] = publisher.published as [(typeof publisher.published)[number]];
    expect(topic).toBe(TOPICS.ticketUpdates);
    expect(record.key).toBe('incidentio:INC-123');
    expect(JSON.parse(record.value)).toEqual({ ...base, id: `incidentio:${id}`, eventId: id, ...expected });
    await app.close();
  });

  it('a redelivered message (same webhook-id, signed again later) -> 202 duplicate, published once', async () => {
    const { app, publisher } = await feedApp();
    const body = fixture('incidentio-incident-created.json');
    const first = await post(app, 'incidentio-incident-created.json', 'msg_again');
    const again = await app.inject({
      method: 'POST',
      url: '/feeds/incidentio',
      headers: standardHeaders(body, 'msg_again', SECRETS.incidentio, Math.floor(Date.parse(RECEIVED_AT) / 1000) - 60),
      payload: body,
    });
    expect(first.json()).toEqual({ accepted: true, id: 'incidentio:msg_again' });
    expect(again.statusCode).toBe(202);
    expect(again.json()).toEqual({ accepted: true, id: 'incidentio:msg_again', duplicate: true });
    expect(publisher.published).toHaveLength(1);
    await app.close();
  });

  it.each([
    ['a private incident event (its id only)', 'incidentio-private-incident-created.json'],
    ['a follow-up event', 'incidentio-follow-up-updated.json'],
  ])('%s -> 202 { ignored: true }, nothing published', async (_name, name) => {
    const { app, publisher } = await feedApp();
    const res = await post(app, name, 'msg_ignored');
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ ignored: true });
    expect(publisher.published).toEqual([]);
    await app.close();
  });

  it('an incident event without a reference names no ticket -> 202 ignored, nothing published', async () => {
    const { app, publisher } = await feedApp();
    const parsed = JSON.parse(fixture('incidentio-incident-created.json').toString());
    delete parsed['public_incident.incident_created_v2'].reference;
    const body = JSON.stringify(parsed);
    const res = await app.inject({
      method: 'POST',
      url: '/feeds/incidentio',
      headers: standardHeaders(body, 'msg_noref', SECRETS.incidentio),
      payload: body,
    });
    expect(res.json()).toEqual({ ignored: true });
    expect(publisher.published).toEqual([]);
    await app.close();
  });

  it('a body that is not an incident.io event -> 400 naming the field, nothing published', async () => {
    const { app, publisher } = await feedApp();
    for (const [body, message] of [
      ['{"kind":"incident"}', 'incident.io payload: event_type: Invalid input: expected string, received undefined'],
      [
        '{"event_type":"public_incident.incident_created_v2","public_incident.incident_created_v2":{"reference":"INC-1"}}',
        'incident.io payload: public_incident.incident_created_v2: id: Invalid input: expected string, received undefined',
      ],
    ] as const) {
      const res = await app.inject({
        method: 'POST',
        url: '/feeds/incidentio',
        headers: standardHeaders(body, 'msg_bad', SECRETS.incidentio),
        payload: body,
      });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({ code: 'validation_error', message });
    }
    expect(publisher.published).toEqual([]);
    await app.close();
  });
});
