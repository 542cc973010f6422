/**
 * The step answer as a delta (docs/contract-v2.md "The step answer as a delta"): with `since` (how
 * many `request.messages` of the previous request the runtime has), `request.messages` carries the
 * messages from that index on and `request.since` echoes it; when that prefix is not the current one
 * (a rebuilt prefix, a rewind below it, more than the previous request had) the whole request with
 * `since: 0`. And a branch keeps the cache key of the session it was branched from.
 * Runs on memory (`ctxflow`) and on Redis (`conformance-on-redis`).
 */
import { describe, expect, it } from 'vitest';
import {
  addContext,
  cacheKeyOf,
  expectError,
  type Item,
  inspect,
  message,
  notice,
  openSession,
  type Session,
  step,
} from './support.ts';

const AGENT = {
  context: 'You help with tickets.',
  model: 'gpt-test',
  tools: [
    {
      name: 'search',
      description: 'Search tickets.',
      parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
    },
  ],
};

type Answer = Awaited<ReturnType<typeof step>> & { request: { since?: number } };

function steps(s: Session, body: Item = {}) {
  return s.call('POST', `/sessions/${s.sessionId}/steps`, body);
}

async function record(s: Session, messages: Item[]) {
  const answer = await s.call('POST', `/sessions/${s.sessionId}/messages`, { messages });
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
}

/** One turn of the scripted session: a user message, sometimes a row, sometimes a tool call with its result. */
async function turn(s: Session, i: number) {
  await message(s, s.sessionId, 'user', `Question ${i}`);
  if (i % 3 === 0) await addContext(s, s.sessionId, [notice(`Ticket ${i} changed.`)]);
  if (i % 4 === 1) {
    await record(s, [
      { role: 'assistant', content: '', toolCalls: [{ callId: `c${i}`, name: 'search', arguments: '{"query":"x"}' }] },
      { role: 'tool', callId: `c${i}`, content: `result ${i}` },
    ]);
  }
}

/** The step asked with `since`, and the same step (its request id again) answered in full. */
async function deltaAndFull(s: Session, requestId: string, since: number, path = 'steps') {
  const url = `/sessions/${s.sessionId}/${path}`;
  const delta = await s.call('POST', url, { requestId, since });
  expect(delta.status, JSON.stringify(delta.body)).toBe(200);
  const full = await s.call('POST', `/sessions/${s.sessionId}/steps`, { requestId });
  expect(full.status, JSON.stringify(full.body)).toBe(200);
  return { delta: delta.body as Answer, full: full.body as Answer };
}

/** Everything but `request.messages` and `request.since` is the full answer's. */
function expectSameBesidesMessages(delta: Answer, full: Answer) {
  const { messages: _d, since: _s, ...deltaRest } = delta.request;
  const { messages: _f, ...fullRest } = full.request;
  expect(deltaRest).toEqual(fullRest);
  expect({ ...delta, request: undefined }).toEqual({ ...full, request: undefined });
  expect(Object.keys(delta.request)).toEqual([...Object.keys(full.request), 'since']);
}

describe('the step answer as a delta (since)', () => {
  it('R3: since: a 50-step session: each delta appended to what the runtime held equals the full request byte for byte; everything else unchanged', async () => {
    const s = await openSession({ agent: AGENT });
    let held: Item[] = [];
    let deltaBytes = 0;
    let fullBytes = 0;
    for (let i = 0; i < 50; i++) {
      await turn(s, i);
      const { delta, full } = await deltaAndFull(s, `req-${i}`, held.length);
      expect(delta.request.since).toBe(held.length);
      expect(full.request).not.toHaveProperty('since');
      expectSameBesidesMessages(delta, full);
      held = held.concat(delta.request.messages);
      expect(JSON.stringify(held)).toBe(JSON.stringify(full.request.messages));
      deltaBytes += JSON.stringify(delta).length;
      fullBytes += JSON.stringify(full).length;
      await message(s, s.sessionId, 'assistant', `Answer ${i}`);
    }
    expect(held.length).toBe(143);
    // The first step holds the whole request; from then on each delta holds this step's messages.
    expect(deltaBytes * 3).toBeLessThan(fullBytes);
  });

  it('R3: since: since 0, and since equal to the previous request: the whole list, and exactly the new messages', async () => {
    const s = await openSession({ agent: AGENT });
    await message(s, s.sessionId, 'user', 'Hi');
    const first = (await steps(s, { since: 0 })).body as Answer;
    expect(first.request.since).toBe(0);
    expect(first.request.messages.map((m) => m.content)).toEqual(['You help with tickets.', 'Hi']);
    await message(s, s.sessionId, 'assistant', 'Hello.');
    await addContext(s, s.sessionId, [notice('Ticket 7 closed.')]);
    const second = (await steps(s, { since: 2 })).body as Answer;
    expect(second.cache.previousEnd).toBe(2);
    expect(second.request.since).toBe(2);
    expect(second.request.messages.map((m) => m.role)).toEqual(['assistant', 'system']);
    expect(second.request.messages[1]).toMatchObject({ row: { kind: 'notice', source: 'app' } });
  });

  it('R3: since: after a rewind the answer is the whole request with since 0 when since is past what survived; a prefix that survived still gives a delta', async () => {
    const s = await openSession({ agent: AGENT });
    await message(s, s.sessionId, 'user', 'One');
    const first = await step(s, s.sessionId);
    await message(s, s.sessionId, 'assistant', 'A1');
    await message(s, s.sessionId, 'user', 'Two');
    const second = await step(s, s.sessionId);
    const held = second.request.messages.length; // system, One, A1, Two
    expect(held).toBe(4);
    const rewound = await s.call('POST', `/sessions/${s.sessionId}/rewind`, { toStepId: first.stepId });
    expect(rewound.status, JSON.stringify(rewound.body)).toBe(200);
    await message(s, s.sessionId, 'user', 'Two, again');
    const { delta, full } = await deltaAndFull(s, 'after-rewind', held);
    expect(delta.cache.previousEnd).toBe(2);
    expect(delta.request.since).toBe(0);
    expect(delta.request.messages).toEqual(full.request.messages);
    expect(delta.request.messages.map((m) => m.content)).toEqual(['You help with tickets.', 'One', 'Two, again']);
    expectSameBesidesMessages(delta, full);

    // The two messages the rewind kept are still the request's first two.
    await s.call('POST', `/sessions/${s.sessionId}/rewind`, { toStepId: first.stepId });
    await message(s, s.sessionId, 'user', 'Three');
    const kept = (await steps(s, { since: 2 })).body as Answer;
    expect(kept.request.since).toBe(2);
    expect(kept.request.messages.map((m) => m.content)).toEqual(['Three']);
  });

  it('R3: since: a rebuilt prefix (force refresh, a new run with other agent context) answers the whole request with since 0', async () => {
    const s = await openSession({ agent: AGENT });
    await message(s, s.sessionId, 'user', 'Hi');
    const first = await step(s, s.sessionId);
    expect((await s.call('PATCH', `/sessions/${s.sessionId}`, { forceRefresh: true })).status).toBe(200);
    const { delta, full } = await deltaAndFull(s, 'refreshed', first.request.messages.length);
    expect(delta.cache).toMatchObject({ rebuilt: true, reason: 'force_refresh', previousEnd: 2 });
    expect(delta.request.since).toBe(0);
    expect(JSON.stringify(delta.request.messages)).toBe(JSON.stringify(full.request.messages));
  });

  it('R3: since: since larger than the message count answers the whole request with since 0', async () => {
    const s = await openSession({ agent: AGENT });
    await message(s, s.sessionId, 'user', 'Hi');
    await step(s, s.sessionId);
    await message(s, s.sessionId, 'assistant', 'Hello.');
    const { delta, full } = await deltaAndFull(s, 'too-far', 1_000);
    expect(full.request.messages).toHaveLength(3);
    expect(delta.request.since).toBe(0);
    expect(delta.request.messages).toEqual(full.request.messages);
    // One past the previous request (2 messages) is past what the runtime can hold: whole as well.
    await message(s, s.sessionId, 'user', 'More');
    expect(((await steps(s, { since: 4 })).body as Answer).request.since).toBe(0);
  });

  it('R3: since: the restart route answers a delta too; a redelivered request with the same since answers the same delta', async () => {
    const s = await openSession({ agent: AGENT });
    await message(s, s.sessionId, 'user', 'Hi');
    await step(s, s.sessionId);
    await message(s, s.sessionId, 'assistant', 'Hello.');
    await message(s, s.sessionId, 'user', 'Again');
    const second = await step(s, s.sessionId);
    expect(second.cache.previousEnd).toBe(2);
    // The restart rewinds to its run's start (the run of the second step: 'Again' survives) and steps.
    const { delta, full } = await deltaAndFull(s, 'restart-1', 1, 'runs/restart');
    expect(delta.cache.previousEnd).toBe(4);
    expect(delta.request.since).toBe(1);
    expect([full.request.messages[0], ...delta.request.messages]).toEqual(full.request.messages);
    const again = await s.call('POST', `/sessions/${s.sessionId}/runs/restart`, { requestId: 'restart-1', since: 1 });
    expect(again.body).toEqual(delta);
  });

  it('R3: since: since that is not a non-negative integer, or since with a provider format: 400 validation_error naming since, nothing written', async () => {
    const s = await openSession({ agent: AGENT });
    await message(s, s.sessionId, 'user', 'Hi');
    const before = await inspect(s, s.sessionId);
    for (const body of [
      { since: -1 },
      { since: 1.5 },
      { since: '3' },
      { since: null },
      { since: 2, format: 'openai-chat' },
      { since: 0, format: 'anthropic' },
      { since: 1, format: 'openai-responses' },
    ]) {
      const answer = await steps(s, body);
      expectError(answer, 400, 'validation_error');
      expect(answer.body.error.message).toMatch(/^since: /);
      const restart = await s.call('POST', `/sessions/${s.sessionId}/runs/restart`, body);
      expectError(restart, 400, 'validation_error');
      expect(restart.body.error.message).toMatch(/^since: /);
    }
    expect(await inspect(s, s.sessionId)).toEqual(before);
    // The neutral format, named, takes since.
    expect(((await steps(s, { since: 0, format: 'neutral' })).body as Answer).request.since).toBe(0);
  });
});

describe('a branch keeps the cache key of its origin', () => {
  it('N4: a branch (and a branch of it) answers cache.key of the session it was branched from; other sessions keep their own', async () => {
    const s = await openSession({ agent: AGENT });
    await message(s, s.sessionId, 'user', 'Hi');
    const first = await step(s, s.sessionId);
    expect(first.cache.key).toBe(cacheKeyOf(s.sessionId));
    const branched = await s.call('POST', `/sessions/${s.sessionId}/branches`, { atStepId: first.stepId });
    expect(branched.status).toBe(201);
    const branchId = branched.body.sessionId as string;
    await message(s, branchId, 'assistant', 'Hello from the branch.');
    const onBranch = await step(s, branchId);
    expect(onBranch.cache.key).toBe(first.cache.key);
    expect(onBranch.cache.key).not.toBe(cacheKeyOf(branchId));
    // The branch's request starts with its origin's: the same key finds the same provider cache.
    expect(onBranch.request.messages.slice(0, 2)).toEqual(first.request.messages);
    const openai = await s.call('POST', `/sessions/${branchId}/steps`, { format: 'openai-chat' });
    expect(openai.body.request.prompt_cache_key).toBe(first.cache.key);

    const again = await s.call('POST', `/sessions/${branchId}/branches`, {});
    expect(again.status).toBe(201);
    expect((await step(s, again.body.sessionId)).cache.key).toBe(first.cache.key);
    // The origin keeps its key; a session of its own has its own.
    expect((await step(s, s.sessionId)).cache.key).toBe(cacheKeyOf(s.sessionId));
    const other = await s.call('POST', '/sessions', { agentId: s.agentId });
    expect((await step(s, other.body.sessionId)).cache.key).toBe(cacheKeyOf(other.body.sessionId));
  });
});
