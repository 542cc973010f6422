/**
 * Traffic over the whole public HTTP API, as users send it: the walkthrough, the Contract v2 flows,
 * `@ctxflow/client` and the examples (typical refusals: contract-refusals.ts). Every call states the status it must get,
 * so the traffic is what it says it is. Run against a base URL (a validating proxy's recorder).
 *
 * Longer than 400 lines: the walkthrough, the v2 flows, the client and the examples in one place, each
 * call with the status it must get, so that the proxy records every route.
 */
import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CtxflowClient } from '@ctxflow/client';
import { Webhook } from 'standardwebhooks';
import { expect } from 'vitest';
import { EXPECT_HEADER, type Expectation } from './validating-proxy.ts';
import { runWalkthrough, walkthroughBlock } from './walkthrough.ts';

const run = promisify(execFile);

export interface TrafficTarget {
  url: string;
  apiKey: string;
  /** The generic feed's secret (also the incidentio and servicenow feeds', taken raw by Standard Webhooks). */
  feedSecret: string;
}

interface CallOptions {
  status: number;
  /** The bearer key; null sends none. Default: the target's. */
  key?: string | null;
  headers?: Record<string, string>;
  /** A body sent as is (no content-type added). */
  raw?: string;
  expect?: Expectation;
}

type Answer = { status: number; body: any; headers: Headers };

/** A JSON request helper that checks the status each call states. */
export function caller(target: TrafficTarget) {
  return async (method: string, path: string, body: unknown, options: CallOptions): Promise<Answer> => {
    const headers: Record<string, string> = { ...options.headers };
    const key = options.key === undefined ? target.apiKey : options.key;
    if (key !== null) headers.authorization = `Bearer ${key}`;
    if (options.expect) headers[EXPECT_HEADER] = options.expect;
    let payload = options.raw;
    if (payload === undefined && body !== undefined) {
      payload = JSON.stringify(body);
      headers['content-type'] ??= 'application/json';
    }
    const response = await fetch(`${target.url}${path}`, {
      method,
      headers,
      ...(payload === undefined ? {} : { body: payload }),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {}
    expect(response.status, `${method} ${path.slice(0, 120)}: ${text.slice(0, 300)}`).toBe(options.status);
    return { status: response.status, body: parsed, headers: response.headers };
  };
}

const SEARCH = {
  type: 'object',
  properties: { query: { type: 'string', minLength: 1 } },
  required: ['query'],
  additionalProperties: false,
};

const AGENT = {
  context: [{ id: 'role', content: 'You help with tickets.' }],
  model: 'gpt-test',
  tools: [
    { name: 'search', description: 'Search tickets.', parameters: SEARCH, strict: true },
    { name: 'ask_user', client: true, deadlineMs: 60_000, parameters: { type: 'object', properties: {} } },
    { name: 'quick_poll', client: true, deadlineMs: 1 },
    { name: 'refund', needsApproval: true },
  ],
  stepContext: { maxBytes: 4096, timeoutMs: 2000 },
  memory: { autoInject: true },
  cacheTtlMs: 300_000,
};

const turn = (calls: [string, string][]) => ({
  role: 'assistant',
  content: '',
  toolCalls: calls.map(([callId, name]) => ({ callId, name, arguments: name === 'search' ? '{"query":"x"}' : '{}' })),
});

/** A signed generic-feed delivery (docs/walkthrough.md step 6). */
export function signed(secret: string, body: string, at = Math.floor(Date.now() / 1000)) {
  const signature = createHmac('sha256', secret).update(`${at}.${body}`).digest('hex');
  return {
    'content-type': 'application/json',
    'x-ctxflow-timestamp': String(at),
    'x-ctxflow-signature': `sha256=${signature}`,
  };
}

/** A Standard Webhooks delivery signed by the `standardwebhooks` package (a raw secret: its UTF-8 bytes). */
export function standardSigned(secret: string, id: string, body: string, at = Math.floor(Date.now() / 1000)) {
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(at),
    'webhook-signature': new Webhook(secret, { format: 'raw' }).sign(id, new Date(at * 1000), body),
  };
}

/** docs/walkthrough.md verbatim, its curl calls carrying the key (a curl config file). */
export async function walkthrough(target: TrafficTarget): Promise<void> {
  const home = mkdtempSync(join(tmpdir(), 'ctxflow-curl-'));
  try {
    writeFileSync(join(home, '.curlrc'), `header = "Authorization: Bearer ${target.apiKey}"\n`);
    const ran = await runWalkthrough(target.url, { CURL_HOME: home });
    expect(ran.stderr).toBe('');
    expect(ran.status).toBe(0);
    expect(ran.text).toBe(walkthroughBlock('walkthrough-output').trim());
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/** Contract v1/v2 flows: tools, the gate, results, approvals, client calls, formats, deltas, rewinds, branches. */
export async function contractFlows(target: TrafficTarget): Promise<void> {
  const call = caller(target);
  const { agentId } = (await call('POST', '/agents', AGENT, { status: 201 })).body;
  await call('GET', `/agents/${agentId}`, undefined, { status: 200 });
  await call('PATCH', `/agents/${agentId}`, { model: 'gpt-test-2' }, { status: 200 });
  await call('PATCH', `/agents/${agentId}`, { context: 'You help with tickets, briefly.' }, { status: 200 });
  await call('POST', `/agents/${agentId}/memories`, { content: 'The customer prefers email.' }, { status: 201 });
  const { sessionId: s } = (await call('POST', '/sessions', { agentId, context: 'Ticket T-7.' }, { status: 201 })).body;
  const base = `/sessions/${s}`;
  await call('GET', '/sessions', undefined, { status: 200 });
  await call('GET', base, undefined, { status: 200 });
  await call('POST', `${base}/messages`, { role: 'user', content: 'Any refunds?' }, { status: 201 });
  await call('POST', `${base}/steps`, { format: 'neutral', requestId: 'r-1' }, { status: 200 });
  await call('POST', `${base}/steps`, { format: 'neutral', requestId: 'r-1' }, { status: 200 });
  await call(
    'POST',
    '/context',
    { sessionId: s, items: [{ kind: 'notice', content: 'Plan: enterprise.' }] },
    { status: 200 },
  );
  await call(
    'POST',
    '/context',
    { sessionId: s, items: [{ kind: 'instruction', content: 'Be brief.' }], key: 'k-1' },
    { status: 200 },
  );
  await call(
    'POST',
    '/context',
    { sessionId: s, items: [{ kind: 'instruction', content: 'Be brief.' }], key: 'k-1' },
    { status: 200 },
  );
  // The gate: run, approval asked then given, a client call answered on time, an unknown tool.
  await call(
    'POST',
    `${base}/messages`,
    {
      messages: [
        turn([
          ['c1', 'search'],
          ['c2', 'refund'],
          ['c3', 'ask_user'],
          ['c4', 'zz'],
        ]),
      ],
    },
    { status: 201 },
  );
  await call('POST', `${base}/tool-calls`, { callId: 'c1', name: 'search' }, { status: 200 });
  await call('POST', `${base}/tool-calls`, { callId: 'c2', name: 'refund' }, { status: 200 });
  await call('POST', `${base}/tool-calls/c2/approval`, { approved: true }, { status: 200 });
  await call('POST', `${base}/tool-calls`, { callId: 'c3', name: 'ask_user' }, { status: 200 });
  await call('POST', `${base}/tool-calls/c3/answer`, { content: 'Friday' }, { status: 200 });
  await call('POST', `${base}/tool-calls`, { callId: 'c4', name: 'zz' }, { status: 200 });
  await call(
    'POST',
    `${base}/tool-calls/c1/context`,
    { items: [{ kind: 'notice', content: '2 refunds found.' }] },
    { status: 200 },
  );
  await call(
    'POST',
    `${base}/tool-calls/c1/context`,
    { origin: 'hook', site: 'after', items: [{ kind: 'notice', content: 'x' }] },
    { status: 200 },
  );
  // A step while c1 and c2 have no result: refused.
  await call('POST', `${base}/steps`, {}, { status: 409 });
  await call(
    'POST',
    `${base}/messages`,
    {
      messages: [
        { role: 'tool', callId: 'c1', content: '2 refunds' },
        { role: 'tool', callId: 'c2', content: 'refunded' },
      ],
    },
    { status: 201 },
  );
  await call('POST', `${base}/steps`, {}, { status: 200 });
  // A switch-off, a denied approval, a client call past its deadline answered late.
  await call('POST', '/context', { sessionId: s, items: [{ kind: 'tools', disable: ['search'] }] }, { status: 200 });
  await call('POST', `${base}/steps`, {}, { status: 200 });
  await call(
    'POST',
    `${base}/messages`,
    {
      messages: [
        turn([
          ['d1', 'search'],
          ['d2', 'refund'],
          ['d3', 'quick_poll'],
        ]),
      ],
    },
    { status: 201 },
  );
  await call('POST', `${base}/tool-calls`, { callId: 'd1', name: 'search' }, { status: 200 });
  await call('POST', `${base}/tool-calls`, { callId: 'd2', name: 'refund' }, { status: 200 });
  await call('POST', `${base}/tool-calls/d2/approval`, { approved: false }, { status: 200 });
  await call('POST', `${base}/tool-calls`, { callId: 'd3', name: 'quick_poll' }, { status: 200 });
  await new Promise((resolve) => setTimeout(resolve, 20));
  await call('POST', `${base}/steps`, { mode: 'retry' }, { status: 200 });
  await call('POST', `${base}/tool-calls/d3/answer`, { content: 'late' }, { status: 200 });
  await call('POST', '/context', { sessionId: s, items: [{ kind: 'tools', enable: ['search'] }] }, { status: 200 });
  await call('POST', `${base}/steps`, { mode: 'forced_completion' }, { status: 200 });
  // Provider formats, each step's provider usage as its SDK returns it (a repeat answers the first).
  const usages: Record<string, unknown> = {
    'openai-chat': { prompt_tokens: 2100, completion_tokens: 3, prompt_tokens_details: { cached_tokens: 1024 } },
    'openai-responses': { input_tokens: 2200, input_tokens_details: { cached_tokens: 2048 }, output_tokens: 3 },
    anthropic: { input_tokens: 5, output_tokens: 3, cache_read_input_tokens: 0, cache_creation_input_tokens: 2300 },
  };
  for (const format of ['openai-chat', 'openai-responses', 'anthropic']) {
    const { stepId } = (await call('POST', `${base}/steps`, { format }, { status: 200 })).body;
    const report = { format, usage: usages[format] };
    await call('POST', `${base}/steps/${stepId}/usage`, report, { status: 200 });
    await call('POST', `${base}/steps/${stepId}/usage`, report, { status: 200 });
  }
  await call('POST', `${base}/steps/stp_x/usage`, { format: 'anthropic', usage: usages.anthropic }, { status: 404 });
  // A delta, a restart.
  const full = (await call('POST', `${base}/steps`, { format: 'neutral' }, { status: 200 })).body;
  await call('POST', `${base}/steps`, { since: full.request.messages.length }, { status: 200 });
  await call('POST', `${base}/steps`, { since: 0, format: 'neutral' }, { status: 200 });
  await call('POST', `${base}/runs/restart`, {}, { status: 200 });
  await call('POST', `${base}/runs/restart`, { format: 'anthropic', requestId: 'rr-1' }, { status: 200 });
  await call('POST', `${base}/runs/restart`, { since: 1 }, { status: 200 });
  await call('PATCH', base, { forceRefresh: true }, { status: 200 });
  await call('PATCH', base, { context: [{ content: 'Ticket T-7, reopened.' }] }, { status: 200 });
  await call('GET', `${base}/messages`, undefined, { status: 200 });
  await call('GET', `${base}/inspect`, undefined, { status: 200 });
  await call('GET', `${base}/stream?follow=false`, undefined, { status: 200 });
  // Subscriptions and a ticket update.
  await call('POST', `${base}/subscriptions`, { source: 'generic', ticket: 'T-7' }, { status: 201 });
  await call('POST', `${base}/subscriptions`, { source: 'generic', ticket: 'T-7' }, { status: 201 });
  await call('POST', `${base}/subscriptions`, { source: 'generic', ticket: '*' }, { status: 201 });
  await call('GET', `${base}/subscriptions`, undefined, { status: 200 });
  const event = JSON.stringify({ eventId: `evt-${s}`, ticket: 'T-7', summary: 'Customer replied.', version: 1 });
  await call('POST', '/feeds/generic', undefined, {
    status: 202,
    key: null,
    raw: event,
    headers: signed(target.feedSecret, event),
  });
  await call('POST', '/feeds/generic', undefined, {
    status: 202,
    key: null,
    raw: event,
    headers: signed(target.feedSecret, event),
  });
  // The same feed signed with Standard Webhooks, and the feeds that take only that.
  const swEvent = JSON.stringify({ eventId: `evt-sw-${s}`, ticket: 'T-7', summary: 'Signed the other way.' });
  await call('POST', '/feeds/generic', undefined, {
    status: 202,
    key: null,
    raw: swEvent,
    headers: standardSigned(target.feedSecret, `msg-${s}`, swEvent),
  });
  const incident = JSON.stringify({
    event_type: 'public_incident.incident_created_v2',
    'public_incident.incident_created_v2': {
      id: '01FDAG4SAP5TYPT98WGR2N7W91',
      reference: 'INC-123',
      name: 'Our database is sad',
      updated_at: '2021-08-17T13:28:57.801578Z',
    },
  });
  await call('POST', '/feeds/incidentio', undefined, {
    status: 202,
    key: null,
    raw: incident,
    headers: standardSigned(target.feedSecret, `msg-inc-${s}`, incident),
  });
  const followUp = JSON.stringify({
    event_type: 'public_incident.follow_up_created_v1',
    'public_incident.follow_up_created_v1': {},
  });
  await call('POST', '/feeds/incidentio', undefined, {
    status: 202,
    key: null,
    raw: followUp,
    headers: standardSigned(target.feedSecret, `msg-fu-${s}`, followUp),
  });
  const record = JSON.stringify({
    sys_id: 'a1',
    number: 'INC0010001',
    short_description: 'Mail down',
    sys_mod_count: '2',
  });
  await call('POST', '/feeds/servicenow', undefined, {
    status: 202,
    key: null,
    raw: record,
    headers: standardSigned(target.feedSecret, `a1.2-${s}`, record),
  });
  await new Promise((resolve) => setTimeout(resolve, 200));
  await call('POST', `${base}/steps`, {}, { status: 200 });
  // Where the update went (a delivery never seen answers the same shape).
  await call('GET', `/deliveries/generic/evt-${s}`, undefined, { status: 200 });
  await call('GET', `/deliveries/generic/never-${s}`, undefined, { status: 200 });
  await call('DELETE', `${base}/subscriptions`, { source: 'generic', ticket: '*' }, { status: 200 });
  await call('DELETE', `${base}/subscriptions?source=generic&ticket=T-7`, undefined, { status: 200 });
  // Rewinds and branches (a restart began a new run: steps of it).
  const early = (await call('POST', `${base}/steps`, {}, { status: 200 })).body;
  await call('POST', `${base}/messages`, { role: 'user', content: 'And now?' }, { status: 201 });
  const late = (await call('POST', `${base}/steps`, {}, { status: 200 })).body;
  await call('POST', `${base}/branches`, { atStepId: early.stepId }, { status: 201 });
  await call('POST', `${base}/branches`, {}, { status: 201 });
  await call('POST', `${base}/rewind`, { beforeStepId: late.stepId }, { status: 200 });
  await call('POST', `${base}/rewind`, { toStepId: early.stepId }, { status: 200 });
  await call('POST', `${base}/steps`, { format: 'neutral' }, { status: 200 });
  // Erasure.
  await call('DELETE', `/agents/${agentId}`, undefined, { status: 409 });
  await call('DELETE', `/agents/${agentId}?cascade=false`, undefined, { status: 409 });
  await call('DELETE', `/agents/${agentId}?cascade=true`, undefined, { status: 204 });
  await call('GET', `/agents/${agentId}`, undefined, { status: 404 });
  await call('DELETE', base, undefined, { status: 204 });
  await call('DELETE', base, undefined, { status: 204 });
  // The operational routes.
  for (const path of [
    '/healthz',
    '/readyz',
    '/metrics',
    '/openapi.json',
    '/inspector',
    '/inspector/app.js',
    '/inspector/app.css',
  ]) {
    await call('GET', path, undefined, { status: 200, key: null });
  }
}

/** `@ctxflow/client` against the target: every method once (no retries, so nothing is hidden). */
export async function clientCalls(target: TrafficTarget): Promise<void> {
  const client = new CtxflowClient({ baseURL: target.url, apiKey: target.apiKey, maxRetries: 0 });
  const { agentId } = await client.agents.create({
    context: 'Client agent.',
    tools: [{ name: 'lookup', client: true }],
  });
  await client.agents.get(agentId);
  await client.agents.update(agentId, { model: 'gpt-client' });
  await client.agents.remember(agentId, 'Likes tea.');
  const { sessionId } = await client.sessions.create({ agentId });
  await client.sessions.list();
  await client.sessions.get(sessionId);
  await client.sessions.inspect(sessionId);
  await client.sessions.update(sessionId, { forceRefresh: true });
  await client.context.add({ sessionId, items: [{ kind: 'notice', content: 'From the client.' }] });
  await client.messages.create(sessionId, { role: 'user', content: 'Hello' });
  const step = await client.step(sessionId);
  await client.step(sessionId, { format: 'openai-chat' });
  await client.messages.createBatch(sessionId, [
    { role: 'assistant', content: '', toolCalls: [{ callId: 'k1', name: 'lookup', arguments: '{}' }] },
  ]);
  await client.toolCalls.gate(sessionId, { callId: 'k1', name: 'lookup' });
  await client.toolCalls.addContext(sessionId, 'k1', { items: [{ kind: 'notice', content: 'Looked up.' }] });
  await client.answers.send(sessionId, 'k1', 'found');
  await client.messages.createBatch(sessionId, [
    { role: 'assistant', content: '', toolCalls: [{ callId: 'k2', name: 'lookup', arguments: '{}' }] },
  ]);
  await client.toolCalls.gate(sessionId, { callId: 'k2', name: 'lookup' });
  await client.answers.send(sessionId, 'k2', 'found again');
  await client.messages.list(sessionId);
  await client.subscriptions.create(sessionId, { source: 'generic', ticket: 'T-9' });
  await client.subscriptions.list(sessionId);
  await client.subscriptions.delete(sessionId, { source: 'generic', ticket: 'T-9' });
  await client.branches.create(sessionId, { atStepId: step.stepId });
  await client.rewind(sessionId, { toStepId: step.stepId });
  await client.restart(sessionId, { format: 'openai-responses' });
  const { sessionId: other } = await client.sessions.create();
  await client.sessions.delete(other);
  await client.agents.delete(agentId, { cascade: true });
  // A refusal the client turns into its error.
  await expect(client.sessions.get(other)).rejects.toMatchObject({ status: 404, code: 'state_session_not_found' });
}

/** The four examples/, as examples.test.ts runs them, pointed at the target. */
export async function examples(target: TrafficTarget): Promise<void> {
  await Promise.all(
    ['ai-sdk.ts', 'openai-agents.ts', 'loop.ts', 'anthropic.ts'].map(async (file) => {
      const { stdout } = await run(process.execPath, ['--conditions=ctxflow-source', `examples/${file}`], {
        env: { ...process.env, CTXFLOW_URL: target.url, CTXFLOW_API_KEY: target.apiKey },
      });
      const last = JSON.parse(stdout.trim().split('\n').at(-1)!);
      expect(last.roles, file).toEqual(['user', 'assistant', 'tool', 'assistant']);
    }),
  );
}
