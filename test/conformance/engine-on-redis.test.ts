/**
 * The engine on the Redis session store answers exactly as on the in-memory store:
 * one scripted end-to-end flow (agent, session, keyed context, steps with hook rows,
 * a replayed request id, a tool call's context, a rewind, a branch, more steps) runs
 * through the HTTP routes on both stores with deterministic ids and a manual clock,
 * and every answer is compared.
 */
import { randomUUID } from 'node:crypto';
import { MemorySessionStore, RedisSessionStore, type SessionStore } from '@ctxflow/session-runner';
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { createHarness, type Harness } from '../support/harness.ts';
import { requireRedis, requireRedisCluster } from '../support/services.ts';

interface Answer {
  what: string;
  status: number;
  body: unknown;
}

/** Ids `<prefix>_1`, `<prefix>_2`, ...: the same sequence on every run. */
function counterIds(): (prefix: string) => string {
  let n = 0;
  return (prefix) => `${prefix}_${++n}`;
}

/** The hook hands out one batch per cursor: ticket 1 from no cursor, ticket 2 from cursor 1, then nothing. */
function scriptHook(h: Harness) {
  h.hook.script = (request) => {
    if (request.cursor === undefined) {
      return { items: [{ kind: 'notice', content: 'Ticket 1 was reopened.' }], cursor: { page: 1 } };
    }
    if (JSON.stringify(request.cursor) === '{"page":1}') {
      return { items: [{ kind: 'notice', content: 'Ticket 2 was closed.' }], cursor: { page: 2 } };
    }
    return undefined;
  };
}

/** Runs the flow on a store; returns every answer in order. */
async function runFlow(store: SessionStore): Promise<Answer[]> {
  const h = await createHarness({ store, engine: { newId: counterIds() } });
  onTestFinished(() => h.app.close());
  scriptHook(h);
  const answers: Answer[] = [];
  const call = async (what: string, method: string, url: string, body?: unknown) => {
    const answer = await h.call(method, url, body);
    answers.push({ what, status: answer.status, body: answer.body });
    return answer.body;
  };

  const { agentId } = await call('create agent', 'POST', '/agents', {
    context: [{ id: 'persona', content: 'You resolve support tickets.' }],
    tools: [{ name: 'search' }, { name: 'escalate' }],
  });
  h.clock.advance(1_000);
  const { sessionId } = await call('create session', 'POST', '/sessions', {
    agentId,
    context: 'Customer: ACME',
  });
  const session = `/sessions/${sessionId}`;
  await call('user message', 'POST', `${session}/messages`, { role: 'user', content: 'Why is ticket 1 open?' });
  const items = [
    { kind: 'instruction', content: 'Answer briefly.' },
    { kind: 'notice', content: 'The customer is on the gold plan.' },
  ];
  await call('add with key', 'POST', '/context', { sessionId, items, key: 'k1' });
  await call('add with key again', 'POST', '/context', { sessionId, items, key: 'k1' });
  await call('add with key, other items', 'POST', '/context', { sessionId, items: items.slice(1), key: 'k1' });

  h.clock.advance(1_000);
  const first = await call('step 1', 'POST', `${session}/steps`, { requestId: 'req-1' });
  await call('step 1 again (same request id)', 'POST', `${session}/steps`, { requestId: 'req-1' });
  await call('assistant message', 'POST', `${session}/messages`, {
    role: 'assistant',
    content: 'Let me search.',
    toolCalls: [{ callId: 'call-1', name: 'search' }],
  });
  await call('tool gate', 'POST', `${session}/tool-calls`, { callId: 'call-1', name: 'search' });
  await call('tool context', 'POST', `${session}/tool-calls/call-1/context`, {
    items: [{ kind: 'tools', disable: ['escalate'] }],
  });
  await call('tool context again', 'POST', `${session}/tool-calls/call-1/context`, {
    items: [{ kind: 'notice', content: 'second time' }],
  });
  await call('tool answer', 'POST', `${session}/messages`, { role: 'tool', content: 'found it', callId: 'call-1' });
  h.clock.advance(1_000);
  await call('step 2', 'POST', `${session}/steps`, { requestId: 'req-2' });
  await call('inspect after step 2', 'GET', `${session}/inspect`);

  await call('add before rewind', 'POST', '/context', { sessionId, items: [{ kind: 'notice', content: 'late news' }] });
  await call('rewind to step 1', 'POST', `${session}/rewind`, { toStepId: first.stepId });
  await call('inspect after rewind', 'GET', `${session}/inspect`);

  h.clock.advance(1_000);
  const { sessionId: branchId } = await call('branch at step 1', 'POST', `${session}/branches`, {
    atStepId: first.stepId,
  });
  await call('branch snapshot', 'GET', `/sessions/${branchId}`);
  await call('branch message', 'POST', `/sessions/${branchId}/messages`, { role: 'user', content: 'And ticket 2?' });
  h.clock.advance(1_000);
  await call('branch step', 'POST', `/sessions/${branchId}/steps`, { requestId: 'req-b1' });
  await call('branch inspect', 'GET', `/sessions/${branchId}/inspect`);

  h.clock.advance(1_000);
  await call('step after rewind', 'POST', `${session}/steps`, { requestId: 'req-2' });
  await call('inspect at the end', 'GET', `${session}/inspect`);
  await call('messages', 'GET', `${session}/messages`);
  await call('sessions', 'GET', '/sessions');
  return answers;
}

let redis: Redis | undefined;
let cluster: Cluster | undefined;
afterAll(async () => {
  await redis?.quit();
  await cluster?.quit();
});

async function deletePrefix(client: Redis | Cluster, prefix: string): Promise<void> {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      cursor = next;
      for (const key of keys) await node.del(key);
    } while (cursor !== '0');
  }
}

describe('the engine on Redis', () => {
  it('the flow on memory does what it should (so the comparison compares something)', async () => {
    const answers = await runFlow(new MemorySessionStore());
    const byWhat = new Map(answers.map((a) => [a.what, a.body]));
    const body = <T>(what: string): T => {
      if (!byWhat.has(what)) throw new Error(`no answer for ${what}`);
      return byWhat.get(what) as T;
    };
    expect(answers.filter((a) => a.status >= 400).map((a) => [a.what, a.status])).toEqual([
      ['add with key, other items', 409],
    ]);
    expect(body('add with key again')).toEqual({ recorded: 0 });
    expect(body('tool context again')).toEqual({ recorded: 0 });
    const step1 = body<{ rows: { content?: string }[] }>('step 1');
    expect(step1.rows.map((r) => r.content)).toEqual([
      'Answer briefly.',
      'The customer is on the gold plan.',
      'Ticket 1 was reopened.',
    ]);
    expect(body('step 1 again (same request id)')).toEqual(step1);
    // call-1 answered model call 2: the rewind drops it with its tool switch (R29).
    expect(body('rewind to step 1')).toEqual({
      logLength: 4,
      requeued: 0,
      queued: 1,
      cursor: { page: 1 },
      activeTools: ['search', 'escalate', '__finish__'],
    });
    // req-2's step was rewound away: the request id is free and makes a new step.
    const again = body<{ stepId: string; rows: { content?: string }[] }>('step after rewind');
    expect(again.stepId).not.toBe(body<{ stepId: string }>('step 2').stepId);
    expect(again.rows.map((r) => r.content)).toEqual(['late news', 'Ticket 2 was closed.']);
    const branchStep = body<{ rows: { content?: string }[] }>('branch step');
    expect(branchStep.rows.map((r) => r.content)).toEqual(['Ticket 2 was closed.']);
    const sessions = body<{ sessions: { sessionId: string }[] }>('sessions');
    expect(sessions.sessions).toHaveLength(2);
  });

  it('answers on Redis equal the answers on memory, answer by answer', async () => {
    const expected = await runFlow(new MemorySessionStore());
    redis ??= new Redis(requireRedis());
    const prefix = `ctxtest-${randomUUID().slice(0, 12)}`;
    onTestFinished(() => deletePrefix(redis!, prefix));
    const actual = await runFlow(new RedisSessionStore(redis, { prefix }));
    expect(actual.map((a) => a.what)).toEqual(expected.map((a) => a.what));
    for (const [i, answer] of actual.entries()) expect(answer, answer.what).toEqual(expected[i]);
  });

  it('answers on a Redis Cluster equal the answers on memory, answer by answer', async () => {
    const expected = await runFlow(new MemorySessionStore());
    cluster ??= new Cluster(requireRedisCluster());
    const prefix = `ctxtest-${randomUUID().slice(0, 12)}`;
    onTestFinished(() => deletePrefix(cluster!, prefix));
    const actual = await runFlow(new RedisSessionStore(cluster, { prefix }));
    for (const [i, answer] of actual.entries()) expect(answer, answer.what).toEqual(expected[i]);
    expect(actual).toHaveLength(expected.length);
  });
});
