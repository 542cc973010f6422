/**
 * Adding context and its idempotency: R10 (a re-run queues nothing twice),
 * R12-R14 (`POST /context`, request keys, sources, refusals), R15 (first-wins
 * for tools and hooks).
 */
import { describe, expect, it } from 'vitest';
import {
  addContext,
  callContext,
  expectError,
  gate,
  inspect,
  instruction,
  notice,
  openSession,
  rowsOf,
  type Session,
  state,
  step,
} from './support.ts';

const FRENCH = instruction('Answer in French.');
const NO_SEARCH = { kind: 'tools', disable: ['search'] };

describe('POST /context and request keys', () => {
  it('R12: POST /context { sessionId, items, key? } answers 200 { recorded } with the count of items queued', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'search' }] } });
    const answer = await s.call('POST', '/context', {
      sessionId: s.sessionId,
      items: [FRENCH, NO_SEARCH],
      key: 'lang-1',
    });
    expect(answer).toEqual({ status: 200, body: { recorded: 2 } });
    const plain = await s.call('POST', '/context', { sessionId: s.sessionId, items: [notice('n')] });
    expect(plain).toEqual({ status: 200, body: { recorded: 1 } });
    expect((await inspect(s, s.sessionId)).queue.map((q) => q.item.kind)).toEqual(['instruction', 'tools', 'notice']);
  });

  it('R13: same key and same items -> recorded 0, nothing queued again, delivered once', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'search' }] } });
    expect(await addContext(s, s.sessionId, [FRENCH, NO_SEARCH], 'k1')).toBe(2);
    expect(await addContext(s, s.sessionId, [FRENCH, NO_SEARCH], 'k1')).toBe(0);
    // Key order inside an item does not make other items.
    expect(
      await addContext(s, s.sessionId, [{ content: 'Answer in French.', kind: 'instruction' }, NO_SEARCH], 'k1'),
    ).toBe(0);
    expect((await inspect(s, s.sessionId)).queue).toHaveLength(2);
    expect((await step(s, s.sessionId)).rows).toHaveLength(2);
    // Still a replay after delivery: nothing queued, nothing delivered.
    expect(await addContext(s, s.sessionId, [FRENCH, NO_SEARCH], 'k1')).toBe(0);
    expect((await step(s, s.sessionId)).rows).toEqual([]);
    expect(rowsOf(await inspect(s, s.sessionId))).toHaveLength(2);
  });

  for (const [what, items] of [
    ['one item changed', [instruction('Answer in German.'), NO_SEARCH]],
    ['more items', [FRENCH, NO_SEARCH, notice('extra')]],
    ['fewer items', [FRENCH]],
    ['same items in another order', [NO_SEARCH, FRENCH]],
  ] as const) {
    it(`R13: same key, other items (${what}) -> 409 state_context_key_conflict, non-retryable, nothing written`, async () => {
      const s = await openSession({ agent: { tools: [{ name: 'search' }] } });
      expect(await addContext(s, s.sessionId, [FRENCH, NO_SEARCH], 'k1')).toBe(2);
      const before = await state(s, s.sessionId);
      const answer = await s.call('POST', '/context', { sessionId: s.sessionId, items, key: 'k1' });
      expectError(answer, 409, 'state_context_key_conflict', false);
      expect(await state(s, s.sessionId)).toEqual(before);
      // The conflict wrote nothing the next step could deliver.
      expect((await step(s, s.sessionId)).rows.map((r) => r.kind)).toEqual(['instruction', 'tools']);
    });
  }

  it('R13: a key conflict after delivery is still refused and writes nothing', async () => {
    const s = await openSession();
    expect(await addContext(s, s.sessionId, [FRENCH], 'k1')).toBe(1);
    await step(s, s.sessionId);
    const before = await state(s, s.sessionId);
    expectError(
      await s.call('POST', '/context', { sessionId: s.sessionId, items: [notice('x')], key: 'k1' }),
      409,
      'state_context_key_conflict',
    );
    expect(await state(s, s.sessionId)).toEqual(before);
  });

  it('R13: without a key every call is a new request and records its items again', async () => {
    const s = await openSession();
    expect(await addContext(s, s.sessionId, [FRENCH])).toBe(1);
    expect(await addContext(s, s.sessionId, [FRENCH])).toBe(1);
    const answer = await step(s, s.sessionId);
    expect(answer.rows.map((r) => r.content)).toEqual(['Answer in French.', 'Answer in French.']);
  });

  it('R13: keys are per session: the same key in another session is a new request', async () => {
    const s = await openSession();
    const other = (await s.call('POST', '/sessions', {})).body.sessionId;
    expect(await addContext(s, s.sessionId, [FRENCH], 'shared')).toBe(1);
    expect(await addContext(s, other, [notice('other')], 'shared')).toBe(1);
  });

  it('R14: app items get source app unless they name their own', async () => {
    const s = await openSession();
    await addContext(s, s.sessionId, [
      notice('plain'),
      { kind: 'notice', content: 'named memory', source: 'memory' },
      { kind: 'notice', content: 'named tool', source: 'tool' },
      { kind: 'notice', content: 'named late', source: 'late-answer' },
    ]);
    const answer = await step(s, s.sessionId);
    expect(answer.rows.map((r) => [r.content, r.source])).toEqual([
      ['plain', 'app'],
      ['named memory', 'memory'],
      ['named tool', 'tool'],
      ['named late', 'late-answer'],
    ]);
  });

  it("R14: source 'hook' is reserved for the stepContext hook: 400, nothing recorded", async () => {
    const s = await openSession();
    const before = await state(s, s.sessionId);
    const answer = await s.call('POST', '/context', {
      sessionId: s.sessionId,
      items: [notice('fine'), { kind: 'notice', content: 'posing as hook', source: 'hook' }],
      key: 'k-hook',
    });
    expectError(answer, 400, 'validation_error');
    expect(await state(s, s.sessionId)).toEqual(before);
    // A refusal does not burn the key.
    expect(await addContext(s, s.sessionId, [notice('fine')], 'k-hook')).toBe(1);
  });

  it('R14: an invalid item is a 400 validation_error and nothing of the request is recorded', async () => {
    const s = await openSession();
    const before = await state(s, s.sessionId);
    const answer = await s.call('POST', '/context', {
      sessionId: s.sessionId,
      items: [FRENCH, { kind: 'instruction' }],
    });
    expectError(answer, 400, 'validation_error');
    expect(await state(s, s.sessionId)).toEqual(before);
  });

  it('R14: an unknown session is 404 state_session_not_found and nothing is recorded anywhere', async () => {
    const s = await openSession();
    const before = await state(s, s.sessionId);
    expectError(
      await s.call('POST', '/context', { sessionId: 'ses_missing', items: [FRENCH], key: 'k' }),
      404,
      'state_session_not_found',
    );
    expect(await state(s, s.sessionId)).toEqual(before);
    expect((await s.call('GET', '/sessions/ses_missing/inspect')).status).toBe(404);
  });
});

/** `POST /context` with this exact request text (the harness's `call` serialises an object). */
async function postText(s: Session, text: string, headers: Record<string, string> = {}) {
  const response = await s.app.inject({
    method: 'POST',
    url: '/context',
    headers: { 'content-type': 'application/json', ...headers },
    payload: text,
  });
  return { status: response.statusCode, body: JSON.parse(response.body) };
}

describe('POST /context: a replayed key, answered from the key', () => {
  const FIRST = (sessionId: string) => JSON.stringify({ sessionId, items: [FRENCH, NO_SEARCH], key: 'k1' });
  /** Records FIRST, then replays it twice (the runner answers a key's later replays from the key). */
  async function recordAndReplay(s: Session, headers: Record<string, string> = {}) {
    expect(await postText(s, FIRST(s.sessionId), headers)).toEqual({ status: 200, body: { recorded: 2 } });
    for (let i = 0; i < 2; i++) {
      expect(await postText(s, FIRST(s.sessionId), headers)).toEqual({ status: 200, body: { recorded: 0 } });
    }
  }

  it('R13: the same request text again and again: 200 { recorded: 0 } every time, nothing written, delivered once', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'search' }] } });
    expect(await postText(s, FIRST(s.sessionId))).toEqual({ status: 200, body: { recorded: 2 } });
    const before = await state(s, s.sessionId);
    for (let i = 0; i < 5; i++) {
      expect(await postText(s, FIRST(s.sessionId))).toEqual({ status: 200, body: { recorded: 0 } });
    }
    expect(await state(s, s.sessionId)).toEqual(before);
    expect((await step(s, s.sessionId)).rows.map((r) => r.kind)).toEqual(['instruction', 'tools']);
    expect(await postText(s, FIRST(s.sessionId))).toEqual({ status: 200, body: { recorded: 0 } });
    expect((await step(s, s.sessionId)).rows).toEqual([]);
  });

  it('R13: the same items with other key order and spacing are the same items, before and after exact replays', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'search' }] } });
    const reordered = `{ "key" : "k1",\n  "items": [ {"content":"Answer in French.",  "kind":"instruction"},\n {"disable":["search"],"kind":"tools"} ],\n  "sessionId": ${JSON.stringify(s.sessionId)} }`;
    expect(await postText(s, FIRST(s.sessionId))).toEqual({ status: 200, body: { recorded: 2 } });
    for (const text of [FIRST(s.sessionId), reordered, reordered, FIRST(s.sessionId), reordered]) {
      expect(await postText(s, text)).toEqual({ status: 200, body: { recorded: 0 } });
    }
    expect((await inspect(s, s.sessionId)).queue).toHaveLength(2);
  });

  for (const [what, items] of [
    ['one item changed', [instruction('Answer in German.'), NO_SEARCH]],
    ['more items', [FRENCH, NO_SEARCH, notice('extra')]],
    ['fewer items', [FRENCH]],
    ['same items in another order', [NO_SEARCH, FRENCH]],
  ] as const) {
    it(`R13: after exact replays, other items under the key (${what}) are still 409 state_context_key_conflict, nothing written`, async () => {
      const s = await openSession({ agent: { tools: [{ name: 'search' }] } });
      await recordAndReplay(s);
      const before = await state(s, s.sessionId);
      const answer = await s.call('POST', '/context', { sessionId: s.sessionId, items, key: 'k1' });
      expectError(answer, 409, 'state_context_key_conflict', false);
      expect(await state(s, s.sessionId)).toEqual(before);
      expect(await postText(s, FIRST(s.sessionId))).toEqual({ status: 200, body: { recorded: 0 } });
    });
  }

  it('R14: after exact replays, an invalid body under the key is still 400 validation_error and writes nothing', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'search' }] } });
    await recordAndReplay(s);
    const before = await state(s, s.sessionId);
    const sessionId = s.sessionId;
    for (const body of [
      { sessionId, items: [FRENCH, { kind: 'instruction' }], key: 'k1' },
      { sessionId, items: [FRENCH, { kind: 'notice', content: 'posing as hook', source: 'hook' }], key: 'k1' },
      { sessionId, items: [FRENCH, { kind: 'tools', disable: ['__finish__'] }], key: 'k1' },
      { sessionId, items: [], key: 'k1' },
      { sessionId, items: 'Answer in French.', key: 'k1' },
      // The exact items, with a property the body does not have.
      { sessionId, items: [FRENCH, NO_SEARCH], key: 'k1', extra: true },
      { sessionId, items: [FRENCH, NO_SEARCH], key: '' },
    ]) {
      expectError(await s.call('POST', '/context', body), 400, 'validation_error');
    }
    expect(await state(s, s.sessionId)).toEqual(before);
    expect(await postText(s, FIRST(s.sessionId))).toEqual({ status: 200, body: { recorded: 0 } });
  });

  it("R12: another tenant's exact replay is 401 or 404, never the owner's answer, and writes nothing", async () => {
    const apiKeys = new Map([
      ['key-a', 'tenant-a'],
      ['key-b', 'tenant-b'],
    ]);
    const s = await openSession({ apiKeys });
    const A = { authorization: 'Bearer key-a' };
    const B = { authorization: 'Bearer key-b' };
    await recordAndReplay(s, A);
    const before = await state(s, s.sessionId);
    expectError(await postText(s, FIRST(s.sessionId), B), 404, 'state_session_not_found');
    expectError(await postText(s, FIRST(s.sessionId), { authorization: 'Bearer key-c' }), 401, 'unauthorized');
    expectError(await postText(s, FIRST(s.sessionId), { authorization: '' }), 401, 'unauthorized');
    expect(await state(s, s.sessionId)).toEqual(before);
    // The owner's replay is still a replay; the same key in tenant b's own session is a new request.
    expect(await postText(s, FIRST(s.sessionId), A)).toEqual({ status: 200, body: { recorded: 0 } });
    const own = (await s.call('POST', '/sessions', {}, B)).body.sessionId;
    expect(await postText(s, FIRST(own), B)).toEqual({ status: 200, body: { recorded: 2 } });
    expect(await postText(s, FIRST(own), B)).toEqual({ status: 200, body: { recorded: 0 } });
  });
});

describe("a tool's and a hook's ctx.addContext", () => {
  it('R10: re-running a tool for the same call queues nothing twice', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'start_upload' }] } });
    await gate(s, s.sessionId, 'call-1', 'start_upload');
    const items = [instruction('Do not edit a.txt until the upload finishes.')];
    expect(await callContext(s, s.sessionId, 'call-1', items)).toBe(1);
    expect(await callContext(s, s.sessionId, 'call-1', items)).toBe(0);
    expect((await inspect(s, s.sessionId)).queue).toHaveLength(1);
    expect((await step(s, s.sessionId)).rows).toHaveLength(1);
    // A re-run after delivery queues nothing either.
    expect(await callContext(s, s.sessionId, 'call-1', items)).toBe(0);
    expect((await step(s, s.sessionId)).rows).toEqual([]);
  });

  it('R10: re-running a hook for the same call queues nothing twice; another call site of the same call still records', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'search' }] } });
    await gate(s, s.sessionId, 'call-1', 'search');
    expect(
      await callContext(s, s.sessionId, 'call-1', [notice('before')], { origin: 'hook', site: 'beforeTool' }),
    ).toBe(1);
    expect(
      await callContext(s, s.sessionId, 'call-1', [notice('before')], { origin: 'hook', site: 'beforeTool' }),
    ).toBe(0);
    expect(await callContext(s, s.sessionId, 'call-1', [notice('after')], { origin: 'hook', site: 'afterTool' })).toBe(
      1,
    );
    expect((await step(s, s.sessionId)).rows.map((r) => r.content)).toEqual(['before', 'after']);
  });

  it('R15: first-wins: a repeat with other items records nothing and is never refused', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'search' }] } });
    await gate(s, s.sessionId, 'call-1', 'search');
    expect(await callContext(s, s.sessionId, 'call-1', [notice('first')])).toBe(1);
    const repeat = await s.call('POST', `/sessions/${s.sessionId}/tool-calls/call-1/context`, {
      items: [notice('second'), notice('third')],
    });
    expect(repeat).toEqual({ status: 200, body: { recorded: 0 } });
    const hookFirst = await callContext(s, s.sessionId, 'call-1', [notice('hook first')], { origin: 'hook' });
    const hookRepeat = await s.call('POST', `/sessions/${s.sessionId}/tool-calls/call-1/context`, {
      origin: 'hook',
      items: [notice('hook other')],
    });
    expect(hookFirst).toBe(1);
    expect(hookRepeat).toEqual({ status: 200, body: { recorded: 0 } });
    expect((await step(s, s.sessionId)).rows.map((r) => r.content)).toEqual(['first', 'hook first']);
  });
});
