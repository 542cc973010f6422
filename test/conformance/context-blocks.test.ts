/**
 * Context blocks and their two scopes: N1-N6 (blocks, verbatim prefix, agent
 * context frozen per run, deferred thread context, forceRefresh, merge by id).
 */
import { describe, expect, it } from 'vitest';
import { cacheKeyOf, expectError, message, newSession, openSession, type Session, step } from './support.ts';

async function system(s: Session, sessionId: string, body: Record<string, unknown> = {}) {
  const answer = await step(s, sessionId, body);
  expect(answer.request.messages[0]!.role).toBe('system');
  return { text: answer.request.messages[0]!.content, cache: answer.cache };
}

async function patchAgent(s: Session, body: Record<string, unknown>) {
  const answer = await s.call('PATCH', `/agents/${s.agentId}`, body);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body;
}

async function patchSession(s: Session, sessionId: string, body: Record<string, unknown>) {
  const answer = await s.call('PATCH', `/sessions/${sessionId}`, body);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body;
}

describe('context blocks', () => {
  it('N1: a string is one unkeyed block; a list is blocks { id?, content }', async () => {
    const s = await openSession({ agent: { context: 'You are a refund triage assistant.' } });
    expect((await s.call('GET', `/agents/${s.agentId}`)).body.context).toEqual([
      { content: 'You are a refund triage assistant.' },
    ]);
    const listed = await s.call('POST', '/agents', {
      context: [{ id: 'rules', content: 'Never refund over $500.' }, { content: 'Be warm.' }],
    });
    expect(listed.status).toBe(201);
    expect((await s.call('GET', `/agents/${listed.body.agentId}`)).body.context).toEqual([
      { id: 'rules', content: 'Never refund over $500.' },
      { content: 'Be warm.' },
    ]);
    const thread = await newSession(s, { agentId: listed.body.agentId, context: 'Tier: gold.' });
    expect((await system(s, thread)).text).toBe('Never refund over $500.\n\nBe warm.\n\nTier: gold.');
  });

  it('N1: anything but a string or a list of { id?, content } is a 400 and creates nothing', async () => {
    const s = await openSession({ agent: {} });
    for (const context of [
      [{ id: 'rules' }],
      [{ id: 'rules', content: 'x', kind: 'rules' }],
      [{ content: 3 }],
      { content: 'not a list' },
      42,
      [
        { id: 'a', content: 'x' },
        { id: 'a', content: 'y' },
      ],
    ]) {
      expectError(await s.call('POST', '/agents', { context }), 400, 'validation_error');
      expectError(await s.call('POST', '/sessions', { agentId: s.agentId, context }), 400, 'validation_error');
    }
    expect((await s.call('GET', '/sessions')).body.sessions).toHaveLength(1);
  });

  it('N2: block contents go verbatim into the cached system prefix; ids never do', async () => {
    const odd = '  Rules:\n\t1. <context kind="x"> stays as written </context>\n2. émoji 🎫 "quotes" \\ backslash  ';
    const s = await openSession({
      agent: {
        context: [
          { id: 'rules-id-xyz', content: odd },
          { id: 'persona-id-xyz', content: 'Be terse.' },
        ],
      },
      session: { context: [{ id: 'profile-id-xyz', content: 'Name: Zoë' }] },
    });
    const { text } = await system(s, s.sessionId);
    expect(text).toBe(`${odd}\n\nBe terse.\n\nName: Zoë`);
    expect(text).not.toContain('-id-xyz');
  });

  it('N3: agent context is shared by every thread of the agent', async () => {
    const s = await openSession({ agent: { context: 'Shared rules.' } });
    const other = await newSession(s, { agentId: s.agentId });
    expect((await system(s, s.sessionId)).text).toBe('Shared rules.');
    expect((await system(s, other)).text).toBe('Shared rules.');
  });

  it('N3: agent context is frozen when a run is created; an edit applies from the next run', async () => {
    const s = await openSession({ agent: { context: 'Rules v1.' } });
    await message(s, s.sessionId, 'user', 'Hi');
    expect((await system(s, s.sessionId)).text).toBe('Rules v1.');
    expect(await patchAgent(s, { context: 'Rules v2.' })).toEqual({
      agentId: s.agentId,
      version: 2,
      appliesFrom: 'next_run',
    });
    // The run in flight keeps what it froze, through retries and forced completion.
    expect((await system(s, s.sessionId)).text).toBe('Rules v1.');
    expect((await system(s, s.sessionId, { mode: 'retry' })).text).toBe('Rules v1.');
    expect((await system(s, s.sessionId, { mode: 'forced_completion' })).text).toBe('Rules v1.');
    // A user message ends the run; the next run sees the edit (a cache rebuild).
    await message(s, s.sessionId, 'user', 'Again');
    expect(await system(s, s.sessionId)).toEqual({
      text: 'Rules v2.',
      cache: { rebuilt: true, reason: 'agent_context', key: cacheKeyOf(s.sessionId), prefixEnd: 0, previousEnd: 2 },
    });
    // Another thread of the agent starts with the edit too.
    expect((await system(s, await newSession(s, { agentId: s.agentId }))).text).toBe('Rules v2.');
  });

  it('N4: thread context is deferred: a warm turn replays the exact cached bytes', async () => {
    const s = await openSession({
      agent: { context: 'Agent.', cacheTtlMs: 60_000 },
      session: { context: 'Tier: silver.' },
    });
    await message(s, s.sessionId, 'user', 'Hi');
    const first = await step(s, s.sessionId);
    expect(first.request.messages[0]!.content).toBe('Agent.\n\nTier: silver.');
    expect(await patchSession(s, s.sessionId, { context: 'Tier: gold.' })).toEqual({
      staged: true,
      forceRefresh: false,
    });
    s.clock.advance(59_000);
    const warm = await step(s, s.sessionId);
    expect(warm.cache).toEqual({
      rebuilt: false,
      reason: null,
      key: cacheKeyOf(s.sessionId),
      prefixEnd: 0,
      previousEnd: 2,
    });
    expect(JSON.stringify(warm.request.messages).startsWith(JSON.stringify(first.request.messages).slice(0, -1))).toBe(
      true,
    );
    // A new run is not a rebuild by itself.
    await message(s, s.sessionId, 'user', 'More');
    s.clock.advance(59_000);
    expect(await system(s, s.sessionId)).toEqual({
      text: 'Agent.\n\nTier: silver.',
      cache: { rebuilt: false, reason: null, key: cacheKeyOf(s.sessionId), prefixEnd: 0, previousEnd: 2 },
    });
  });

  it('N4: a staged thread edit folds in when the cache has gone cold', async () => {
    const s = await openSession({
      agent: { context: 'Agent.', cacheTtlMs: 1000 },
      session: { context: 'Tier: silver.' },
    });
    await step(s, s.sessionId);
    await patchSession(s, s.sessionId, { context: 'Tier: gold.' });
    s.clock.advance(1000);
    expect((await system(s, s.sessionId)).text).toBe('Agent.\n\nTier: silver.');
    s.clock.advance(1001);
    expect(await system(s, s.sessionId)).toEqual({
      text: 'Agent.\n\nTier: gold.',
      cache: { rebuilt: true, reason: 'cache_cold', key: cacheKeyOf(s.sessionId), prefixEnd: 0, previousEnd: 1 },
    });
  });

  it('N4: a staged thread edit folds in at a model change and at a new thread', async () => {
    const s = await openSession({ agent: { context: 'Agent.', model: 'm-1' }, session: { context: 'Tier: silver.' } });
    await step(s, s.sessionId);
    await patchSession(s, s.sessionId, { context: 'Tier: gold.' });
    await patchAgent(s, { model: 'm-2' });
    await message(s, s.sessionId, 'user', 'Next run');
    expect(await system(s, s.sessionId)).toEqual({
      text: 'Agent.\n\nTier: gold.',
      cache: { rebuilt: true, reason: 'model_change', key: cacheKeyOf(s.sessionId), prefixEnd: 0, previousEnd: 1 },
    });
    const fresh = await newSession(s, { agentId: s.agentId, context: 'Tier: bronze.' });
    expect(await system(s, fresh)).toEqual({
      text: 'Agent.\n\nTier: bronze.',
      cache: { rebuilt: true, reason: 'new_thread', key: cacheKeyOf(fresh), prefixEnd: 0, previousEnd: 0 },
    });
  });

  it('N5: forceRefresh folds the staged thread context at the next step', async () => {
    const s = await openSession({ agent: { context: 'Agent.' }, session: { context: 'Tier: silver.' } });
    await step(s, s.sessionId);
    expect(
      await patchSession(s, s.sessionId, { context: 'Account tier: enterprise. Region: EU.', forceRefresh: true }),
    ).toEqual({
      staged: true,
      forceRefresh: true,
    });
    expect(await system(s, s.sessionId)).toEqual({
      text: 'Agent.\n\nAccount tier: enterprise. Region: EU.',
      cache: { rebuilt: true, reason: 'force_refresh', key: cacheKeyOf(s.sessionId), prefixEnd: 0, previousEnd: 1 },
    });
    expect((await system(s, s.sessionId)).cache).toEqual({
      rebuilt: false,
      reason: null,
      key: cacheKeyOf(s.sessionId),
      prefixEnd: 0,
      previousEnd: 1,
    });
    // forceRefresh alone folds an edit staged earlier.
    await patchSession(s, s.sessionId, { context: 'Region: US.' });
    expect((await system(s, s.sessionId)).text).toBe('Agent.\n\nAccount tier: enterprise. Region: EU.');
    await patchSession(s, s.sessionId, { forceRefresh: true });
    expect((await system(s, s.sessionId)).text).toBe('Agent.\n\nRegion: US.');
  });

  it('N6: updating one agent block by id cannot drop another', async () => {
    const s = await openSession({
      agent: {
        context: [
          { id: 'rules', content: 'Never issue a refund over $500 without approval.' },
          { id: 'persona', content: 'You are warm, concise, and a little witty.' },
        ],
      },
    });
    await patchAgent(s, { context: [{ id: 'persona', content: 'You are formal and terse.' }] });
    expect((await s.call('GET', `/agents/${s.agentId}`)).body.context).toEqual([
      { id: 'rules', content: 'Never issue a refund over $500 without approval.' },
      { id: 'persona', content: 'You are formal and terse.' },
    ]);
    await patchAgent(s, { context: [{ id: 'tone', content: 'No emoji.' }] });
    expect((await system(s, s.sessionId)).text).toBe(
      'Never issue a refund over $500 without approval.\n\nYou are formal and terse.\n\nNo emoji.',
    );
  });

  it('N6: updating one thread block by id cannot drop another', async () => {
    const s = await openSession({
      agent: {},
      session: {
        context: [
          { id: 'profile', content: 'Name: Ana.' },
          { id: 'manifest', content: 'Memories: none.' },
        ],
      },
    });
    await step(s, s.sessionId);
    await patchSession(s, s.sessionId, { context: [{ id: 'manifest', content: 'Memories: 3.' }] });
    await patchSession(s, s.sessionId, {
      context: [{ id: 'profile', content: 'Name: Ana Lima.' }],
      forceRefresh: true,
    });
    expect((await system(s, s.sessionId)).text).toBe('Name: Ana Lima.\n\nMemories: 3.');
  });
});
