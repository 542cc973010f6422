/**
 * The feed routes on a bare fastify app: refusals that publish nothing, delivery to the bus, the
 * plugin's scope and logs. Longer than 400 lines: the three share one app, ledger and recorded bus.
 */
import { Writable } from 'node:stream';
import { feedRoutes, MemoryDeliveryLedger } from '@ctxflow/feeds';
import { createLogger } from '@ctxflow/service-kit';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import {
  feedApp,
  fixture,
  genericHeaders,
  githubHeaders,
  hmacHex,
  jiraHeaders,
  NOW,
  publishing,
  RecordingPublisher,
  SECRETS,
  zendeskHeaders,
} from '../helpers.ts';

const NOW_S = Math.floor(NOW / 1000);
const generic = fixture('generic-update.json');
const github = fixture('github-issues-opened.json');
const jira = fixture('jira-issue-created.json');
const zendesk = fixture('zendesk-ticket-status-changed.json');
const tampered = (body: Buffer) => Buffer.from(body.toString('utf8').replace('"', ' "'));

type Headers = Record<string, string>;
const without = (headers: Headers, name: string): Headers => {
  const copy = { ...headers };
  delete copy[name];
  return copy;
};

/** Each refusal: the request, and what it is. Every one must be 401 `unauthorized` and publish nothing. */
const unauthorizedCases: { name: string; url: string; headers: Headers; body: Buffer }[] = [
  { name: 'generic: tampered body', url: '/feeds/generic', headers: genericHeaders(generic), body: tampered(generic) },
  {
    name: 'generic: wrong-length signature',
    url: '/feeds/generic',
    headers: { ...genericHeaders(generic), 'x-ctxflow-signature': 'sha256=abcd' },
    body: generic,
  },
  {
    name: 'generic: signature of another secret',
    url: '/feeds/generic',
    headers: genericHeaders(generic, NOW_S, 'not-the-secret'),
    body: generic,
  },
  {
    name: 'generic: missing signature header',
    url: '/feeds/generic',
    headers: without(genericHeaders(generic), 'x-ctxflow-signature'),
    body: generic,
  },
  {
    name: 'generic: missing timestamp header',
    url: '/feeds/generic',
    headers: without(genericHeaders(generic), 'x-ctxflow-timestamp'),
    body: generic,
  },
  {
    name: 'generic: stale timestamp (301 s old), correctly signed',
    url: '/feeds/generic',
    headers: genericHeaders(generic, NOW_S - 301),
    body: generic,
  },
  {
    name: 'generic: future timestamp (301 s ahead), correctly signed',
    url: '/feeds/generic',
    headers: genericHeaders(generic, NOW_S + 301),
    body: generic,
  },
  {
    name: 'generic: timestamp not in unix seconds',
    url: '/feeds/generic',
    headers: { ...genericHeaders(generic), 'x-ctxflow-timestamp': '2024-05-01T09:31:00Z' },
    body: generic,
  },
  {
    name: 'github: tampered body',
    url: '/feeds/github',
    headers: githubHeaders(github, 'issues', 'd-1'),
    body: tampered(github),
  },
  {
    name: 'github: wrong-length signature',
    url: '/feeds/github',
    headers: { ...githubHeaders(github, 'issues', 'd-1'), 'x-hub-signature-256': `sha256=${'ab'.repeat(33)}` },
    body: github,
  },
  {
    name: 'github: legacy sha1 header only',
    url: '/feeds/github',
    headers: {
      ...without(githubHeaders(github, 'issues', 'd-1'), 'x-hub-signature-256'),
      'x-hub-signature': 'sha1=0123456789abcdef0123456789abcdef01234567',
    },
    body: github,
  },
  { name: 'jira: tampered body', url: '/feeds/jira', headers: jiraHeaders(jira), body: tampered(jira) },
  {
    name: 'jira: wrong-length signature',
    url: '/feeds/jira',
    headers: { ...jiraHeaders(jira), 'x-hub-signature': 'sha256=' },
    body: jira,
  },
  {
    name: 'jira: missing signature header',
    url: '/feeds/jira',
    headers: without(jiraHeaders(jira), 'x-hub-signature'),
    body: jira,
  },
  { name: 'zendesk: tampered body', url: '/feeds/zendesk', headers: zendeskHeaders(zendesk), body: tampered(zendesk) },
  {
    name: 'zendesk: wrong-length signature',
    url: '/feeds/zendesk',
    headers: { ...zendeskHeaders(zendesk), 'x-zendesk-webhook-signature': 'c2hvcnQ=' },
    body: zendesk,
  },
  {
    name: 'zendesk: missing timestamp header',
    url: '/feeds/zendesk',
    headers: without(zendeskHeaders(zendesk), 'x-zendesk-webhook-signature-timestamp'),
    body: zendesk,
  },
  {
    name: 'zendesk: stale timestamp, correctly signed',
    url: '/feeds/zendesk',
    headers: zendeskHeaders(zendesk, new Date(NOW - 301_000).toISOString()),
    body: zendesk,
  },
  {
    name: 'zendesk: future timestamp, correctly signed',
    url: '/feeds/zendesk',
    headers: zendeskHeaders(zendesk, new Date(NOW + 301_000).toISOString()),
    body: zendesk,
  },
];

describe('feed refusals publish nothing', () => {
  for (const c of unauthorizedCases) {
    it(`${c.name} -> 401 unauthorized`, async () => {
      const { app, publisher } = await feedApp();
      const res = await app.inject({ method: 'POST', url: c.url, headers: c.headers, payload: c.body });
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: { code: 'unauthorized', message: expect.any(String), retryable: false } });
      expect(publisher.published).toEqual([]);
      await app.close();
    });
  }

  it('a timestamp exactly 300 s old is still inside the window -> 202', async () => {
    const { app, publisher } = await feedApp();
    const res = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: genericHeaders(generic, NOW_S - 300),
      payload: generic,
    });
    expect(res.statusCode).toBe(202);
    expect(publisher.published).toHaveLength(1);
    await app.close();
  });

  it("GitHub's test vector passes the route's signature check (then 400: the body is not JSON)", async () => {
    const { app, publisher } = await feedApp({ secrets: { github: "It's a Secret to Everybody" } });
    const res = await app.inject({
      method: 'POST',
      url: '/feeds/github',
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'issues',
        'x-github-delivery': 'vector-1',
        'x-hub-signature-256': 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
      },
      payload: 'Hello, World!',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('validation_error');
    expect(publisher.published).toEqual([]);
    await app.close();
  });

  it('a truncated JSON body, correctly signed -> 400 validation_error', async () => {
    const { app, publisher } = await feedApp();
    const truncated = generic.subarray(0, generic.length - 20);
    const res = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: genericHeaders(truncated),
      payload: truncated,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      error: { code: 'validation_error', message: 'body: not valid JSON (truncated or malformed)', retryable: false },
    });
    expect(publisher.published).toEqual([]);
    await app.close();
  });

  it('a generic body missing summary -> 400 naming the field', async () => {
    const { app, publisher } = await feedApp();
    const body = JSON.stringify({ eventId: 'e-1', ticket: 'T-1' });
    const res = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: genericHeaders(body),
      payload: body,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('validation_error');
    expect(res.json().error.message).toMatch(/^body: summary: /);
    expect(publisher.published).toEqual([]);
    await app.close();
  });

  it('a GitHub issues payload without issue.number -> 400 naming the path', async () => {
    const { app, publisher } = await feedApp();
    const payload = JSON.parse(github.toString('utf8'));
    delete payload.issue.number;
    const body = JSON.stringify(payload);
    const res = await app.inject({
      method: 'POST',
      url: '/feeds/github',
      headers: githubHeaders(body, 'issues', 'd-2'),
      payload: body,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/^github issues payload: issue\.number: /);
    expect(publisher.published).toEqual([]);
    await app.close();
  });

  it('a GitHub delivery without X-GitHub-Delivery -> 400 naming the header', async () => {
    const { app, publisher } = await feedApp();
    const res = await app.inject({
      method: 'POST',
      url: '/feeds/github',
      headers: without(githubHeaders(github, 'issues', 'd-3'), 'x-github-delivery'),
      payload: github,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toBe('missing x-github-delivery header');
    expect(publisher.published).toEqual([]);
    await app.close();
  });

  it('a body over the default 256 KiB -> 413 payload_too_large', async () => {
    const { app, publisher } = await feedApp();
    const body = JSON.stringify({ eventId: 'big', ticket: 'T-1', summary: 'x'.repeat(256 * 1024) });
    const res = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: genericHeaders(body),
      payload: body,
    });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toEqual({ error: { code: 'payload_too_large', message: expect.any(String), retryable: false } });
    expect(publisher.published).toEqual([]);
    await app.close();
  });

  it('a body over a configured maxBodyBytes -> 413, a body under it -> 202', async () => {
    const { app, publisher } = await feedApp({ maxBodyBytes: 2048 });
    const big = JSON.stringify({ eventId: 'big', ticket: 'T-1', summary: 'x'.repeat(2100) });
    const over = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: genericHeaders(big),
      payload: big,
    });
    expect(over.statusCode).toBe(413);
    const under = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: genericHeaders(generic),
      payload: generic,
    });
    expect(under.statusCode).toBe(202);
    expect(publisher.published).toHaveLength(1);
    await app.close();
  });

  it('a source without a secret -> 404 feed_disabled', async () => {
    const { app, publisher } = await feedApp({ secrets: { generic: SECRETS.generic } });
    const res = await app.inject({ method: 'POST', url: '/feeds/jira', headers: jiraHeaders(jira), payload: jira });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: { code: 'feed_disabled', message: expect.any(String), retryable: false } });
    expect(publisher.published).toEqual([]);
    await app.close();
  });

  it('a non-JSON content type -> 400, nothing published', async () => {
    const { app, publisher } = await feedApp();
    const res = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: { ...genericHeaders(generic), 'content-type': 'text/plain' },
      payload: generic,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('validation_error');
    expect(publisher.published).toEqual([]);
    await app.close();
  });
});

describe('delivery to the bus', () => {
  it('bus down -> 503 bus_unavailable with Retry-After; the retry after recovery publishes once', async () => {
    const { app, publisher } = await feedApp();
    const request = {
      method: 'POST' as const,
      url: '/feeds/generic',
      headers: genericHeaders(generic),
      payload: generic,
    };
    publisher.failing = true;
    const down = await app.inject(request);
    expect(down.statusCode).toBe(503);
    expect(down.headers['retry-after']).toBe('5');
    expect(down.json()).toEqual({ error: { code: 'bus_unavailable', message: expect.any(String), retryable: true } });
    expect(publisher.published).toEqual([]);

    publisher.failing = false;
    const retry = await app.inject(request);
    expect(retry.statusCode).toBe(202);
    expect(retry.json()).toEqual({ accepted: true, id: 'generic:evt-2024-05-01-0001' });
    const again = await app.inject(request);
    expect(again.statusCode).toBe(202);
    expect(publisher.published).toHaveLength(1);
    await app.close();
  });

  it('a repeated delivery (same eventId) -> 202 both times, published once', async () => {
    const { app, publisher } = await feedApp();
    const first = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: genericHeaders(generic),
      payload: generic,
    });
    // A resend is signed anew, with a later timestamp: the same eventId still makes it a duplicate.
    const second = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: genericHeaders(generic, NOW_S + 60),
      payload: generic,
    });
    expect(first.statusCode).toBe(202);
    expect(second.statusCode).toBe(202);
    expect(second.json()).toEqual({ accepted: true, id: 'generic:evt-2024-05-01-0001', duplicate: true });
    expect(publisher.published).toHaveLength(1);
    await app.close();
  });

  it('a GitHub redelivery (same X-GitHub-Delivery) -> 202, published once', async () => {
    const { app, publisher } = await feedApp();
    const headers = githubHeaders(github, 'issues', 'redelivered-1');
    const first = await app.inject({ method: 'POST', url: '/feeds/github', headers, payload: github });
    const second = await app.inject({ method: 'POST', url: '/feeds/github', headers, payload: github });
    expect([first.statusCode, second.statusCode]).toEqual([202, 202]);
    expect(publisher.published).toHaveLength(1);
    await app.close();
  });

  it('the same eventId from two sources is two deliveries', async () => {
    const { app, publisher } = await feedApp();
    const body = JSON.stringify({ eventId: 'shared-id', ticket: 'T-1', summary: 's' });
    await app.inject({ method: 'POST', url: '/feeds/generic', headers: genericHeaders(body), payload: body });
    await app.inject({
      method: 'POST',
      url: '/feeds/github',
      headers: githubHeaders(github, 'issues', 'shared-id'),
      payload: github,
    });
    expect(publisher.published.map((p) => p.record.headers?.['ctxflow-record-id'])).toEqual([
      'generic:shared-id',
      'github:shared-id',
    ]);
    await app.close();
  });

  it('a copy arriving while the first is still being published -> 503 with Retry-After, published once', async () => {
    const { app, publisher } = await feedApp();
    let open!: () => void;
    publisher.gate = new Promise((resolve) => {
      open = resolve;
    });
    const request = {
      method: 'POST' as const,
      url: '/feeds/generic',
      headers: genericHeaders(generic),
      payload: generic,
    };
    const first = app.inject(request);
    await publishing(publisher, 1);
    const second = await app.inject(request);
    expect(second.statusCode).toBe(503);
    expect(second.headers['retry-after']).toBe('5');
    open();
    expect((await first).statusCode).toBe(202);
    expect(publisher.published).toHaveLength(1);
    await app.close();
  });

  it('leaseMs: a delivery whose publish never finished is published by the first copy after its lease ends', async () => {
    let now = NOW;
    const ledger = new MemoryDeliveryLedger({ clock: () => now });
    const { app, publisher } = await feedApp({ ledger, leaseMs: 5_000 });
    publisher.gate = new Promise(() => {}); // the first publish never answers (its instance died)
    const request = {
      method: 'POST' as const,
      url: '/feeds/generic',
      headers: genericHeaders(generic),
      payload: generic,
    };
    void app.inject(request);
    await publishing(publisher, 1);
    publisher.gate = undefined;
    now = NOW + 4_999;
    const held = await app.inject(request);
    expect(held.statusCode).toBe(503);
    expect(held.json().error.code).toBe('bus_unavailable');
    now = NOW + 5_000;
    const taken = await app.inject(request);
    expect(taken.statusCode).toBe(202);
    expect(publisher.published).toHaveLength(1);
    await app.close();
  });

  it('a ledger that fails -> 503 store_unavailable, nothing published', async () => {
    const ledger = new MemoryDeliveryLedger();
    ledger.claim = async () => {
      throw new Error('connection refused');
    };
    const { app, publisher } = await feedApp({ ledger });
    const res = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: genericHeaders(generic),
      payload: generic,
    });
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('5');
    expect(res.json()).toEqual({ error: { code: 'store_unavailable', message: expect.any(String), retryable: true } });
    expect(publisher.published).toEqual([]);
    await app.close();
  });
});

describe('plugin scope and logs', () => {
  it('the raw-body JSON parser stays inside the plugin: a sibling route still gets parsed JSON', async () => {
    const app = Fastify();
    app.post('/echo', async (request) => ({ got: request.body }));
    await app.register(feedRoutes, {
      publisher: new RecordingPublisher(),
      ledger: new MemoryDeliveryLedger(),
      secrets: SECRETS,
      clock: () => NOW,
    });
    const echo = await app.inject({ method: 'POST', url: '/echo', payload: { a: 1 } });
    expect(echo.json()).toEqual({ got: { a: 1 } });
    const feed = await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: genericHeaders(generic),
      payload: generic,
    });
    expect(feed.statusCode).toBe(202);
    await app.close();
  });

  it('neither secrets, signatures nor bodies reach the logs', async () => {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk, _encoding, callback) {
        lines.push(String(chunk));
        callback();
      },
    });
    const logger = createLogger({ service: 'feed-ingestor', level: 'trace', destination });
    const { app } = await feedApp({ logger });
    const marker = 'body-marker-7b1e';
    const body = JSON.stringify({ eventId: 'log-1', ticket: 'T-1', summary: marker });
    const headers = genericHeaders(body);
    await app.inject({ method: 'POST', url: '/feeds/generic', headers, payload: body });
    await app.inject({
      method: 'POST',
      url: '/feeds/generic',
      headers: { ...headers, 'x-ctxflow-signature': 'sha256=00' },
      payload: body,
    });
    await app.inject({ method: 'POST', url: '/feeds/generic', headers, payload: `${body.slice(0, 10)}` });
    await app.close();
    const log = lines.join('');
    expect(log).toContain('feed delivery accepted');
    for (const secret of Object.values(SECRETS)) expect(log).not.toContain(secret);
    expect(log).not.toContain(marker);
    expect(log).not.toContain(headers['x-ctxflow-signature'].slice(7));
    expect(log).not.toContain(hmacHex(SECRETS.generic, headers['x-ctxflow-timestamp'], '.', body));
  });
});
