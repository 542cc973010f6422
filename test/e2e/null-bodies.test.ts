/**
 * A JSON `null` where a body object is expected is a bad body, not a missing one: every
 * POST and PATCH route of the embedded app (the list comes from the app's own routes)
 * answers 400 `validation_error`, and nothing is written: no session, agent, message,
 * step, subscription or feed update appears.
 */
import { errorCodes } from '@ctxflow/contracts';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { parseApiKeys } from '@ctxflow/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  genericHeaders,
  githubHeaders,
  gitlabHeaders,
  jiraHeaders,
  linearHeaders,
  pagerdutyHeaders,
  SECRETS,
  standardHeaders,
  zendeskHeaders,
} from '../../shared/feeds/test/helpers.ts';

const KEY = 'null-bodies-key';
const AUTH = { authorization: `Bearer ${KEY}` };
const NULL = 'null';

let embedded: EmbeddedApp;
const routes: { method: string; url: string }[] = [];
let sessionId = '';
let agentId = '';
let published = 0;

async function call(method: string, url: string, payload?: string, headers: Record<string, string> = {}) {
  const answer = await embedded.app.inject({
    method: method as 'POST',
    url,
    headers: { ...AUTH, ...(payload === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(payload === undefined ? {} : { payload }),
  });
  return { status: answer.statusCode, body: answer.body ? JSON.parse(answer.body) : undefined };
}

/** What the tenant can read back: every session, the fixture's session, agent, messages and subscriptions. */
async function everything() {
  const s = `/sessions/${sessionId}`;
  const reads = ['/sessions', s, `${s}/inspect`, `${s}/messages`, `${s}/subscriptions`, `/agents/${agentId}`];
  return Promise.all(reads.map(async (url) => ({ url, ...(await call('GET', url)) })));
}

/** The signature headers each feed needs for a body, signed now. */
function feedHeaders(source: string, body: string): Record<string, string> {
  const now = Date.now();
  switch (source) {
    case 'generic':
      return genericHeaders(body, Math.floor(now / 1000));
    case 'cloudevents':
      return {
        ...genericHeaders(body, Math.floor(now / 1000), SECRETS.generic),
        'content-type': 'application/cloudevents+json',
      };
    case 'github':
      return githubHeaders(body, 'issues', 'delivery-1');
    case 'jira':
      return jiraHeaders(body);
    case 'zendesk':
      return zendeskHeaders(body, new Date(now).toISOString());
    case 'incidentio':
    case 'servicenow':
      return standardHeaders(body, 'msg-null-1', SECRETS[source], Math.floor(now / 1000));
    case 'pagerduty':
      return pagerdutyHeaders(body, 'delivery-1');
    case 'linear':
      return linearHeaders(body, 'delivery-1');
    case 'gitlab':
      return gitlabHeaders('Issue Hook', 'delivery-1');
    default:
      throw new Error(`no signature for the ${source} feed`);
  }
}

beforeAll(async () => {
  embedded = await buildEmbeddedApp({
    config: {
      apiKeys: parseApiKeys(`nulls:${KEY}`),
      secrets: { ...SECRETS, cloudevents: SECRETS.generic },
    },
    onRoute: (route) => {
      for (const method of [route.method].flat()) routes.push({ method, url: route.url });
    },
  });
  const publisher = embedded.bus.publisher;
  const publish = publisher.publish.bind(publisher);
  publisher.publish = async (...args) => {
    published += 1;
    return publish(...args);
  };
  agentId = (await call('POST', '/agents', JSON.stringify({ tools: [{ name: 'deploy', needsApproval: true }] }))).body
    .agentId;
  sessionId = (await call('POST', '/sessions', JSON.stringify({ agentId }))).body.sessionId;
  expect(
    (await call('POST', `/sessions/${sessionId}/messages`, JSON.stringify({ role: 'user', content: 'Hi' }))).status,
  ).toBe(201);
});

afterAll(async () => {
  await embedded?.close();
});

describe('a null body', () => {
  it('is 400 validation_error on every POST and PATCH route, and nothing is written', async () => {
    const writes = routes.filter((r) => r.method === 'POST' || r.method === 'PATCH');
    // Every route that takes a body: the session-runner's, the subscriptions' and the feeds'.
    expect(writes.map((r) => `${r.method} ${r.url}`).sort()).toEqual(
      [
        'PATCH /agents/:agentId',
        'PATCH /sessions/:sessionId',
        'POST /agents',
        'POST /agents/:agentId/memories',
        'POST /context',
        'POST /feeds/cloudevents',
        'POST /feeds/generic',
        'POST /feeds/github',
        'POST /feeds/incidentio',
        'POST /feeds/jira',
        'POST /feeds/servicenow',
        'POST /feeds/zendesk',
        'POST /feeds/pagerduty',
        'POST /feeds/linear',
        'POST /feeds/gitlab',
        'POST /sessions',
        'POST /sessions/:sessionId/branches',
        'POST /sessions/:sessionId/messages',
        'POST /sessions/:sessionId/rewind',
        'POST /sessions/:sessionId/runs/restart',
        'POST /sessions/:sessionId/steps',
        'POST /sessions/:sessionId/steps/:stepId/usage',
        'POST /sessions/:sessionId/subscriptions',
        'POST /sessions/:sessionId/tool-calls',
        'POST /sessions/:sessionId/tool-calls/:callId/answer',
        'POST /sessions/:sessionId/tool-calls/:callId/approval',
        'POST /sessions/:sessionId/tool-calls/:callId/context',
      ].sort(),
    );
    const before = await everything();
    /** The session-runner's routes name the body; the feeds and subscriptions their own fields. */
    const namesTheBody = (url: string) => !url.startsWith('/feeds/') && !url.endsWith('/subscriptions');
    const answers: Record<string, unknown> = {};
    for (const { method, url } of writes) {
      const path = url
        .replace(':sessionId', sessionId)
        .replace(':agentId', agentId)
        .replace(':callId', 'call-1')
        .replace(':stepId', 'step-1');
      const feed = /^\/feeds\/(.+)$/.exec(url)?.[1];
      const answer = await call(method, path, NULL, feed ? feedHeaders(feed, NULL) : {});
      const error = answer.body?.error;
      answers[`${method} ${url}`] = {
        status: answer.status,
        code: error?.code,
        retryable: error?.retryable,
        ...(namesTheBody(url) ? { message: error?.message, details: error?.details } : {}),
      };
    }
    expect(answers).toEqual(
      Object.fromEntries(
        writes.map(({ method, url }) => [
          `${method} ${url}`,
          {
            status: 400,
            code: 'validation_error',
            retryable: errorCodes.validation_error.retryable,
            ...(namesTheBody(url)
              ? {
                  message: 'body: Invalid input: expected object, received null',
                  details: [{ path: [], message: 'Invalid input: expected object, received null' }],
                }
              : {}),
          },
        ]),
      ),
    );
    expect(await everything()).toEqual(before);
    expect(published).toBe(0);
  });
});
