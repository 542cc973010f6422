/**
 * The routes that take Standard Webhooks signatures: incidentio and
 * servicenow (only those), generic and cloudevents (beside their own
 * headers). Every delivery is signed by the `standardwebhooks` package; every
 * refusal is 401 `unauthorized`, as the generic feed refuses, and publishes
 * nothing.
 */
import { describe, expect, it } from 'vitest';
import { feedApp, fixture, genericHeaders, NOW, SECRETS, standardHeaders } from '../helpers.ts';

const NOW_S = Math.floor(NOW / 1000);
const CE_SECRET = 'whsec_Y2xvdWRldmVudHMtdGVzdC1zZWNyZXQ=';
const ALL = { ...SECRETS, cloudevents: CE_SECRET };
const CE_BODY = Buffer.from(
  JSON.stringify({
    specversion: '1.0',
    id: 'ce-sw-1',
    source: 'https://jira.example.com',
    type: 'dev.ctxflow.ticket.commented',
    subject: 'PROJ-7',
    data: { summary: 'Customer replied' },
  }),
);

interface Feed {
  url: string;
  body: Buffer;
  secret: string;
  /** Extra headers of the route (the CloudEvents structured-mode media type). */
  extra?: Record<string, string>;
}
const feeds: Record<string, Feed> = {
  incidentio: {
    url: '/feeds/incidentio',
    body: fixture('incidentio-incident-created.json'),
    secret: SECRETS.incidentio,
  },
  servicenow: {
    url: '/feeds/servicenow',
    body: fixture('servicenow-incident-commented.json'),
    secret: SECRETS.servicenow,
  },
  generic: { url: '/feeds/generic', body: fixture('generic-update.json'), secret: SECRETS.generic },
  cloudevents: {
    url: '/feeds/cloudevents',
    body: CE_BODY,
    secret: CE_SECRET,
    extra: { 'content-type': 'application/cloudevents+json' },
  },
};

const signed = (f: Feed, id = 'msg_1', timestampS = NOW_S, secret: string | string[] = f.secret) => ({
  ...standardHeaders(f.body, id, secret, timestampS),
  ...f.extra,
});
const without = (headers: Record<string, string>, name: string) => {
  const { [name]: _, ...rest } = headers;
  return rest;
};
const tampered = (body: Buffer) => Buffer.from(body.toString('utf8').replace('"', ' "'));

describe('Standard Webhooks on the feed routes', () => {
  for (const [name, f] of Object.entries(feeds)) {
    const refusals: { what: string; headers: Record<string, string>; body?: Buffer }[] = [
      { what: 'tampered body', headers: signed(f), body: tampered(f.body) },
      { what: 'signature of another secret', headers: signed(f, 'msg_1', NOW_S, 'whsec_b3RoZXItc2VjcmV0LTEyMzQ=') },
      { what: 'stale timestamp (301 s), correctly signed', headers: signed(f, 'msg_1', NOW_S - 301) },
      { what: 'future timestamp (301 s), correctly signed', headers: signed(f, 'msg_1', NOW_S + 301) },
      { what: 'another webhook-id than signed', headers: { ...signed(f), 'webhook-id': 'msg_2' } },
      { what: 'missing webhook-id', headers: without(signed(f), 'webhook-id') },
      { what: 'missing webhook-timestamp', headers: without(signed(f), 'webhook-timestamp') },
      { what: 'malformed webhook-signature', headers: { ...signed(f), 'webhook-signature': 'v1,abc' } },
    ];
    for (const r of refusals) {
      it(`${name}: ${r.what} -> 401 unauthorized, nothing published`, async () => {
        const { app, publisher } = await feedApp({ secrets: ALL });
        const res = await app.inject({ method: 'POST', url: f.url, headers: r.headers, payload: r.body ?? f.body });
        expect(res.statusCode).toBe(401);
        expect(res.json()).toEqual({ error: { code: 'unauthorized', message: expect.any(String), retryable: false } });
        expect(publisher.published).toEqual([]);
        await app.close();
      });
    }

    it(`${name}: signed by the package -> 202 and published once; the same delivery again -> duplicate`, async () => {
      const { app, publisher } = await feedApp({ secrets: ALL });
      const first = await app.inject({ method: 'POST', url: f.url, headers: signed(f), payload: f.body });
      const again = await app.inject({
        method: 'POST',
        url: f.url,
        headers: signed(f, 'msg_1', NOW_S - 30),
        payload: f.body,
      });
      expect(first.statusCode).toBe(202);
      expect(first.json().duplicate).toBeUndefined();
      expect(again.json()).toEqual({ ...first.json(), duplicate: true });
      expect(publisher.published).toHaveLength(1);
      await app.close();
    });
  }

  it('incidentio and servicenow take no other scheme: the generic headers alone -> 401 naming webhook-id', async () => {
    const { app, publisher } = await feedApp({ secrets: ALL });
    for (const f of [feeds.incidentio!, feeds.servicenow!]) {
      const res = await app.inject({ method: 'POST', url: f.url, headers: genericHeaders(f.body), payload: f.body });
      expect(res.statusCode).toBe(401);
      expect(res.json().error.message).toBe('missing webhook-id header');
    }
    expect(publisher.published).toEqual([]);
    await app.close();
  });

  it('generic: with webhook-signature present only Standard Webhooks verifies; a valid x-ctxflow signature does not rescue it', async () => {
    const { app, publisher } = await feedApp({ secrets: ALL });
    const f = feeds.generic!;
    const headers = { ...genericHeaders(f.body), ...signed(f), 'webhook-signature': `v1,${'A'.repeat(43)}=` };
    const res = await app.inject({ method: 'POST', url: f.url, headers, payload: f.body });
    expect(res.statusCode).toBe(401);
    expect(res.json().error.message).toBe('webhook-signature: no signature matches the body');
    expect(publisher.published).toEqual([]);
    await app.close();
  });

  it('generic and cloudevents dedupe by their own id (eventId, the event id), not webhook-id', async () => {
    const { app, publisher } = await feedApp({ secrets: ALL });
    for (const f of [feeds.generic!, feeds.cloudevents!]) {
      const first = await app.inject({ method: 'POST', url: f.url, headers: signed(f, 'msg_a'), payload: f.body });
      const other = await app.inject({ method: 'POST', url: f.url, headers: signed(f, 'msg_b'), payload: f.body });
      expect(first.statusCode).toBe(202);
      expect(other.json()).toEqual({ ...first.json(), duplicate: true });
    }
    expect(publisher.published.map((p) => JSON.parse(p.record.value).id)).toEqual([
      'generic:evt-2024-05-01-0001',
      'cloudevents:https://jira.example.com:ce-sw-1',
    ]);
    await app.close();
  });

  it('a configured source (the generic format under its own name) takes Standard Webhooks too', async () => {
    const { app, publisher } = await feedApp({ secrets: { 'my-tracker': 'whsec_bXktdHJhY2tlci1zZWNyZXQ=' } });
    const f = feeds.generic!;
    const res = await app.inject({
      method: 'POST',
      url: '/feeds/my-tracker',
      headers: standardHeaders(f.body, 'msg_tracker', 'whsec_bXktdHJhY2tlci1zZWNyZXQ='),
      payload: f.body,
    });
    expect(res.json()).toEqual({ accepted: true, id: 'my-tracker:evt-2024-05-01-0001' });
    expect(JSON.parse(publisher.published[0]!.record.value).source).toBe('my-tracker');
    await app.close();
  });

  it('a sender mid-rotation signs with both keys: the configured new one alone verifies', async () => {
    const f = feeds.incidentio!;
    const { app, publisher } = await feedApp({ secrets: { incidentio: f.secret } });
    const headers = signed(f, 'msg_rot', NOW_S, ['whsec_b2xkLWtleS1ub3ctcmV0aXJlZA==', f.secret]);
    const res = await app.inject({ method: 'POST', url: f.url, headers, payload: f.body });
    expect(res.statusCode).toBe(202);
    expect(publisher.published).toHaveLength(1);
    await app.close();
  });
});
