/**
 * The stack's public API on one port: the session-runner, step-context and
 * feed-ingestor as their own processes on Kafka and Redis, with two tenants.
 * Sessions, subscriptions, the signed webhook and the steps all go through the
 * session-runner's port; step-context (on Redis) applies the update to the
 * subscribed sessions of its tenant only. Every route of the public contract
 * (v1 and v2) answers there as the embedded app does.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { CtxflowClient } from '@ctxflow/client';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../faults/processes.ts';
import { type Stack, startStack } from '../support/stack.ts';

const run = randomUUID().slice(0, 8);
/** The stack's Redis key prefix (startStack: `<name>:<run>`). */
const prefix = `stack-api:${run}`;
const KEYS = { ta: 'key-a', tb: 'key-b' } as const;
const SECRETS = { ta: `secret-a-${run}`, tb: `secret-b-${run}` } as const;
type Tenant = keyof typeof KEYS;
/** The stack's retention: every key of a session has at most this PTTL right after a write. */
const TTL_MS = 3_600_000;

const LOOKUP = {
  name: 'lookup_order',
  description: 'Find an order by id',
  parameters: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'], additionalProperties: false },
};

/** Every key of the session's hash tag under the stack's prefix, with its PTTL. */
async function keysOf(redis: Redis, sessionId: string): Promise<{ key: string; pttl: number }[]> {
  const found: { key: string; pttl: number }[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*{${sessionId}}*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const pttl = await redis.pttl(key);
      // -2: gone since the scan (a row outbox the relay emptied); a key without a TTL is -1 and kept.
      if (pttl !== -2) found.push({ key, pttl });
    }
  } while (cursor !== '0');
  return found;
}

function signed(body: object, secret: string) {
  const raw = JSON.stringify(body);
  const ts = String(Math.floor(Date.now() / 1000));
  const signature = createHmac('sha256', secret).update(`${ts}.${raw}`).digest('hex');
  return {
    body: raw,
    headers: {
      'content-type': 'application/json',
      'x-ctxflow-timestamp': ts,
      'x-ctxflow-signature': `sha256=${signature}`,
    },
  };
}

describe('the stack serves the whole public contract on the session-runner port', () => {
  let stack: Stack<Tenant>;
  let runnerUrl = '';
  let feedUrl = '';
  let redis: Redis;

  beforeAll(async () => {
    stack = await startStack({
      name: 'stack-api',
      run,
      keys: KEYS,
      feedIngestor: true,
      env: {
        CTXFLOW_FEED_SECRET_GENERIC: `ta:${SECRETS.ta},tb:${SECRETS.tb}`,
        CTXFLOW_SESSION_TTL_MS: String(TTL_MS),
      },
    });
    ({ runnerUrl, feedUrl, redis } = stack);
  }, 120_000);

  afterAll(() => stack?.stop());

  const api = (tenant: Tenant, method: string, path: string, body?: object) => stack.api(tenant, method, path, body);

  const webhook = async (url: string, tenant: Tenant, update: object) => {
    const { body, headers } = signed(update, SECRETS[tenant]);
    const response = await fetch(url, { method: 'POST', headers, body });
    return { status: response.status, body: await response.json() };
  };

  /** Steps the session until a step commits rows (the update reached step-context and its feed stream). */
  const stepUntilRows = (tenant: Tenant, sessionId: string) =>
    waitFor(
      `a notice row in ${sessionId}`,
      async () => {
        const step = await api(tenant, 'POST', `/sessions/${sessionId}/steps`, {});
        expect(step.status).toBe(200);
        return step.body.rows.length > 0 ? step.body.rows : undefined;
      },
      30_000,
      200,
    );

  it('subscribe, signed webhook and step through :8080 alone; tenant B never sees tenant A', async () => {
    const ofA = (await api('ta', 'POST', '/sessions', {})).body.sessionId as string;
    const ofB = (await api('tb', 'POST', '/sessions', {})).body.sessionId as string;
    expect(await api('ta', 'POST', `/sessions/${ofA}/subscriptions`, { source: 'generic', ticket: '*' })).toEqual({
      status: 201,
      body: { sessionId: ofA, subscription: { source: 'generic', ticket: '*' }, created: true },
    });
    expect((await api('tb', 'POST', `/sessions/${ofB}/subscriptions`, { source: 'generic', ticket: '*' })).status).toBe(
      201,
    );
    // The same ownership checks as the embedded app: another tenant's session is not found.
    expect((await api('tb', 'POST', `/sessions/${ofA}/subscriptions`, { source: 'generic', ticket: '*' })).status).toBe(
      404,
    );
    expect(await api('ta', 'GET', `/sessions/${ofA}/subscriptions`)).toEqual({
      status: 200,
      body: { sessionId: ofA, subscriptions: [{ source: 'generic', ticket: '*' }] },
    });

    const eventId = `evt-${run}`;
    const ticket = `T-${run}`;
    const fromA = await webhook(`${runnerUrl}/feeds/generic`, 'ta', { eventId, ticket, summary: 'A: refund approved' });
    expect(fromA).toEqual({ status: 202, body: { accepted: true, id: `generic:${eventId}` } });
    const rowsA = await stepUntilRows('ta', ofA);
    expect(rowsA).toHaveLength(1);
    expect(rowsA[0]).toMatchObject({ role: 'context', kind: 'notice', source: 'hook' });
    expect(rowsA[0].content).toContain('A: refund approved');
    // step-context applies an update to all its sessions in one write: B would have it by now.
    const stepB = await api('tb', 'POST', `/sessions/${ofB}/steps`, {});
    expect(stepB.body.rows).toEqual([]);
    expect(JSON.stringify(stepB.body)).not.toContain('refund approved');

    // The feed-ingestor shares the delivery ledger: the same delivery sent there is a duplicate.
    expect((await webhook(feedUrl, 'ta', { eventId, ticket, summary: 'A: refund approved' })).body).toEqual({
      accepted: true,
      id: `generic:${eventId}`,
      duplicate: true,
    });
    // The same event id from tenant B is B's own delivery: published and delivered to B only.
    const fromB = await webhook(`${runnerUrl}/feeds/generic`, 'tb', { eventId, ticket, summary: 'B: private note' });
    expect(fromB).toEqual({ status: 202, body: { accepted: true, id: `generic:${eventId}` } });
    const rowsB = await stepUntilRows('tb', ofB);
    expect(rowsB).toHaveLength(1);
    expect(rowsB[0].content).toContain('B: private note');
    expect((await api('ta', 'POST', `/sessions/${ofA}/steps`, {})).body.rows).toEqual([]);
  });

  it('DELETE /sessions/:id on the runner port erases the runner and step-context keys; retention on every key', async () => {
    const erased = (await api('ta', 'POST', '/sessions', {})).body.sessionId as string;
    const witness = (await api('ta', 'POST', '/sessions', {})).body.sessionId as string;
    const ticket = `E-${run}`;
    for (const id of [erased, witness]) {
      expect((await api('ta', 'POST', `/sessions/${id}/subscriptions`, { source: 'generic', ticket })).status).toBe(
        201,
      );
    }
    await webhook(`${runnerUrl}/feeds/generic`, 'ta', { eventId: `e1-${run}`, ticket, summary: 'first' });
    await stepUntilRows('ta', erased);
    // Right after a write, every key of the session (runner's and step-context's) expires within the TTL.
    const keys = await keysOf(redis, erased);
    expect(keys.some((k) => k.key.includes(':step-context:'))).toBe(true);
    expect(keys.some((k) => k.key.endsWith(':log'))).toBe(true);
    for (const { key, pttl } of keys) {
      expect(pttl, key).toBeGreaterThan(0);
      expect(pttl, key).toBeLessThanOrEqual(TTL_MS);
    }
    // A pending batch: applied by step-context, not yet stepped.
    await webhook(`${runnerUrl}/feeds/generic`, 'ta', { eventId: `e2-${run}`, ticket, summary: 'second' });
    await stepUntilRows('ta', witness);

    expect((await api('ta', 'DELETE', `/sessions/${erased}`)).status).toBe(204);
    expect((await api('ta', 'DELETE', `/sessions/${erased}`)).status).toBe(204);
    expect(await keysOf(redis, erased)).toEqual([]);
    // A later webhook for its ticket reaches the witness and brings nothing of the erased one back.
    await webhook(`${runnerUrl}/feeds/generic`, 'ta', { eventId: `e3-${run}`, ticket, summary: 'third' });
    const rows = await stepUntilRows('ta', witness);
    expect(rows[0].content).toContain('third');
    expect(await keysOf(redis, erased)).toEqual([]);
    expect((await api('ta', 'GET', `/sessions/${erased}`)).status).toBe(404);
  });
  /** A client of the runner's port that records the status of every answer. */
  const clientOf = (tenant: Tenant) => {
    const statuses: number[] = [];
    const recording: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      statuses.push(response.status);
      return response;
    };
    return { client: new CtxflowClient({ baseURL: runnerUrl, apiKey: KEYS[tenant], fetch: recording }), statuses };
  };

  it('every route of the public contract (v1 and v2) answers on the runner port alone', async () => {
    const { client, statuses } = clientOf('ta');
    const status = () => statuses.at(-1);

    // Operations routes (no credentials) and the OpenAPI document.
    expect((await fetch(`${runnerUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${runnerUrl}/readyz`)).status).toBe(200);
    const metrics = await fetch(`${runnerUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('# TYPE');
    const openapi = await fetch(`${runnerUrl}/openapi.json`);
    expect(openapi.status).toBe(200);
    const paths = Object.keys(((await openapi.json()) as { paths: Record<string, unknown> }).paths);
    expect(paths).toEqual(
      expect.arrayContaining([
        '/agents',
        '/agents/{agentId}',
        '/sessions',
        '/sessions/{sessionId}',
        '/context',
        '/sessions/{sessionId}/steps',
        '/sessions/{sessionId}/messages',
        '/sessions/{sessionId}/tool-calls',
        '/sessions/{sessionId}/subscriptions',
        '/feeds/generic',
      ]),
    );

    // Agents: a tool with parameters; PATCH applies from the next run.
    const { agentId } = await client.agents.create({
      context: 'You are a support agent.',
      model: 'gpt-test',
      tools: [LOOKUP, { name: 'refund' }],
    });
    expect(status()).toBe(201);
    expect(await client.agents.update(agentId, { context: 'You are a careful support agent.' })).toEqual({
      agentId,
      version: 2,
      appliesFrom: 'next_run',
    });
    expect(status()).toBe(200);

    const { sessionId } = await client.sessions.create({ agentId });
    expect(status()).toBe(201);
    expect(await client.sessions.update(sessionId, { context: 'The customer is on the gold plan.' })).toEqual({
      staged: true,
      forceRefresh: false,
    });
    expect(status()).toBe(200);

    // POST /context with a key: recorded once; other items under the same key are a conflict.
    const notice = { kind: 'notice' as const, content: 'Order 7 shipped.' };
    expect(await client.context.add({ sessionId, items: [notice], key: `k-${run}` })).toEqual({ recorded: 1 });
    expect(await client.context.add({ sessionId, items: [notice], key: `k-${run}` })).toEqual({ recorded: 0 });
    await expect(
      client.context.add({ sessionId, items: [{ kind: 'notice', content: 'Other.' }], key: `k-${run}` }),
    ).rejects.toMatchObject({ status: 409, code: 'state_context_key_conflict', retryable: false });

    expect(await client.messages.create(sessionId, { role: 'user', content: 'Where is order 7?' })).toEqual({
      seq: expect.any(Number),
    });
    expect(status()).toBe(201);

    // A neutral step: the v2 fields.
    const first = await client.step(sessionId);
    expect(status()).toBe(200);
    expect(first.request.system).toContain('You are a careful support agent.');
    expect(first.request.system).toContain('The customer is on the gold plan.');
    expect(first.request.model).toBe('gpt-test');
    expect(first.request.toolChoice).toBe('auto');
    expect(first.request.tools.find((t) => t.name === 'lookup_order')?.parameters).toEqual(LOOKUP.parameters);
    expect(first.request.activeTools).toEqual(['lookup_order', 'refund', '__finish__']);
    expect(first.rows).toEqual([
      { id: expect.any(String), role: 'context', kind: 'notice', source: 'app', content: 'Order 7 shipped.' },
    ]);
    expect(first.cache.key).toMatch(/^ctxflow-[0-9a-f]{32}$/);

    // The tool gate, then an assistant turn with its tool result in one write.
    expect(await client.toolCalls.gate(sessionId, { callId: 'c1', name: 'lookup_order' })).toEqual({ execute: true });
    expect(status()).toBe(200);
    const { seqs } = await client.messages.createBatch(sessionId, [
      { role: 'assistant', content: '', toolCalls: [{ callId: 'c1', name: 'lookup_order', arguments: '{"id":"7"}' }] },
      { role: 'tool', callId: 'c1', content: 'shipped on Monday' },
    ]);
    expect(status()).toBe(201);
    expect(seqs).toHaveLength(2);

    // A switched-off tool is inactive; an undeclared one is unavailable.
    expect(await client.context.add({ sessionId, items: [{ kind: 'tools', disable: ['refund'] }] })).toEqual({
      recorded: 1,
    });
    const second = await client.step(sessionId);
    expect(second.request.activeTools).toEqual(['lookup_order', '__finish__']);
    expect(await client.toolCalls.gate(sessionId, { callId: 'c2', name: 'refund' })).toEqual({
      execute: false,
      reason: 'tool_inactive',
    });
    expect(await client.toolCalls.gate(sessionId, { callId: 'c3', name: 'no_such_tool' })).toEqual({
      execute: false,
      reason: 'tool_unavailable',
    });

    // A provider format: the OpenAI Chat Completions body.
    const chat = await client.step(sessionId, { format: 'openai-chat' });
    expect(chat.request.prompt_cache_key).toBe(first.cache.key);
    // The tool switch is a context row after the tool result.
    expect(chat.request.messages.slice(-3)).toMatchObject([
      {
        role: 'assistant',
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'lookup_order', arguments: '{"id":"7"}' } }],
      },
      { role: 'tool', content: 'shipped on Monday', tool_call_id: 'c1' },
      { role: 'system', content: expect.stringContaining('disabled: refund') },
    ]);

    // What a user may see: never a context row.
    const messages = await client.messages.list(sessionId);
    expect(status()).toBe(200);
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
    expect(JSON.stringify(messages)).not.toContain('Order 7 shipped.');

    // Subscriptions and a bad webhook signature in the error form.
    expect(await client.subscriptions.create(sessionId, { source: 'generic', ticket: `S-${run}` })).toEqual({
      sessionId,
      subscription: { source: 'generic', ticket: `S-${run}` },
      created: true,
    });
    expect(status()).toBe(201);
    const accepted = await webhook(`${runnerUrl}/feeds/generic`, 'ta', {
      eventId: `x-${run}`,
      ticket: 'T',
      summary: 's',
    });
    expect(accepted).toEqual({ status: 202, body: { accepted: true, id: `generic:x-${run}` } });
    const { body, headers } = signed({ eventId: `bad-${run}`, ticket: 'T', summary: 's' }, 'not-the-secret');
    const refused = await fetch(`${runnerUrl}/feeds/generic`, { method: 'POST', headers, body });
    expect(refused.status).toBe(401);
    expect(await refused.json()).toEqual({
      error: { code: 'unauthorized', message: expect.any(String), retryable: false },
    });

    // Tenant B: tenant A's session and agent do not exist.
    const other = clientOf('tb').client;
    await expect(other.sessions.get(sessionId)).rejects.toMatchObject({
      status: 404,
      code: 'state_session_not_found',
    });
    await expect(other.step(sessionId)).rejects.toMatchObject({ status: 404, code: 'state_session_not_found' });
    await expect(other.messages.list(sessionId)).rejects.toMatchObject({
      status: 404,
      code: 'state_session_not_found',
    });
  });
});
