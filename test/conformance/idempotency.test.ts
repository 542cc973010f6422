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
