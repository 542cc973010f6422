/**
 * Memory auto-inject (R34), late client answers (R35) and the app adding
 * context in every session state (R11).
 */
import { describe, expect, it } from 'vitest';
import {
  addContext,
  expectError,
  gate,
  inspect,
  message,
  notice,
  openSession,
  rowsOf,
  state,
  step,
  streamChunks,
} from './support.ts';

describe('memory', () => {
  it('R34: with auto-inject on, recalled memories are committed as a memory row before the call, once per user turn', async () => {
    const s = await openSession({ agent: { context: 'You help.', memory: { autoInject: true } } });
    for (const content of ['Prefers email.', 'Lives in Lyon.']) {
      expect((await s.call('POST', `/agents/${s.agentId}/memories`, { content })).status).toBe(201);
    }
    await message(s, s.sessionId, 'user', 'Hi');
    const first = await step(s, s.sessionId);
    expect(first.rows).toEqual([
      {
        id: expect.any(String),
        role: 'context',
        kind: 'memory',
        source: 'memory',
        content: 'Lives in Lyon.\nPrefers email.',
      },
    ]);
    expect(first.request.messages.at(-1)).toEqual({
      role: 'system',
      content: '<context kind="memory" source="memory">\nLives in Lyon.\nPrefers email.\n</context>',
      row: { id: first.rows.at(-1)!.id, kind: 'memory', source: 'memory' },
    });
    expect(rowsOf(await inspect(s, s.sessionId))).toEqual(first.rows);
    expect((await step(s, s.sessionId)).rows).toEqual([]);
    await message(s, s.sessionId, 'user', 'Next question');
    expect((await step(s, s.sessionId)).rows.map((r) => r.kind)).toEqual(['memory']);
  });

  it('R34: without auto-inject no memory row is committed', async () => {
    const s = await openSession({ agent: {} });
    await s.call('POST', `/agents/${s.agentId}/memories`, { content: 'Prefers email.' });
    await message(s, s.sessionId, 'user', 'Hi');
    expect((await step(s, s.sessionId)).rows).toEqual([]);
  });

  it('R34: a recall too large commits an empty memory row and a context_skipped chunk, and is not recalled again each step', async () => {
    const s = await openSession({ agent: { memory: { autoInject: true } } });
    for (let i = 0; i < 3; i++) {
      await s.call('POST', `/agents/${s.agentId}/memories`, { content: `${i}: ${'m'.repeat(16_000)}` });
    }
    await message(s, s.sessionId, 'user', 'Hi');
    const first = await step(s, s.sessionId);
    expect(first.rows.map(({ id: _id, ...r }) => r)).toEqual([
      { role: 'context', kind: 'memory', source: 'memory', content: '' },
    ]);
    expect(first.skipped).toEqual([{ reason: 'memory_too_large', message: expect.any(String) }]);
    const { chunks, text } = await streamChunks(s, s.sessionId);
    expect(chunks.filter((c) => c.event === 'context_skipped').map((c) => [c.data.stepId, c.data.reason])).toEqual([
      [first.stepId, 'memory_too_large'],
    ]);
    expect(text).not.toContain('mmmm');
    expect(s.telemetry.skipped.map((k) => k.reason)).toEqual(['memory_too_large']);
    const second = await step(s, s.sessionId);
    expect(second.rows).toEqual([]);
    expect(second.skipped).toEqual([]);
  });
});

describe('late answers', () => {
  const agent = { tools: [{ name: 'ask_user', client: true, deadlineMs: 1000 }] };

  it("R35: a client tool's answer after its deadline becomes a notice row of source late-answer at the next model call", async () => {
    const s = await openSession({ agent });
    await step(s, s.sessionId);
    const decision = await gate(s, s.sessionId, 'c1', 'ask_user');
    expect(decision).toEqual({ execute: true, client: true, deadlineAt: new Date(s.clock.now() + 1000).toISOString() });
    s.clock.advance(1001);
    const answer = await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c1/answer`, {
      content: 'Ship it Friday.',
    });
    expect(answer).toEqual({ status: 200, body: { late: true, recorded: 1 } });
    expect(rowsOf(await inspect(s, s.sessionId))).toEqual([]); // not before the next model call
    const next = await step(s, s.sessionId);
    expect(next.rows).toHaveLength(1);
    expect(next.rows[0]).toMatchObject({ role: 'context', kind: 'notice', source: 'late-answer' });
    expect(next.rows[0]!.content).toContain('Ship it Friday.');
    expect(next.request.messages.at(-1)!.role).toBe('user');
    // Delivered once; a repeated answer records nothing.
    const repeat = await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c1/answer`, {
      content: 'Ship it Friday.',
    });
    expect(repeat.body).toEqual({ late: false, recorded: 0 });
    expect((await step(s, s.sessionId)).rows).toEqual([]);
    const messages = (await s.call('GET', `/sessions/${s.sessionId}/messages`)).body.messages;
    expect(JSON.stringify(messages)).not.toContain('Ship it Friday.');
  });

  it('R35: an answer at or before its deadline is an ordinary tool message, no context row', async () => {
    const s = await openSession({ agent });
    await gate(s, s.sessionId, 'c1', 'ask_user');
    s.clock.advance(1000);
    const answer = await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c1/answer`, { content: 'On time.' });
    expect(answer.body).toEqual({ late: false, recorded: 1 });
    const next = await step(s, s.sessionId);
    expect(next.rows).toEqual([]);
    expect(next.request.messages.at(-1)).toEqual({ role: 'tool', content: 'On time.', callId: 'c1', name: 'ask_user' });
  });

  it('R35: an answer for a call that is not waiting for the client is 404 state_call_not_found, nothing written', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'search' }, ...agent.tools] } });
    await gate(s, s.sessionId, 'c1', 'search');
    const before = await state(s, s.sessionId);
    expectError(
      await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c1/answer`, { content: 'x' }),
      404,
      'state_call_not_found',
    );
    expectError(
      await s.call('POST', `/sessions/${s.sessionId}/tool-calls/nope/answer`, { content: 'x' }),
      404,
      'state_call_not_found',
    );
    expect(await state(s, s.sessionId)).toEqual(before);
  });
});

describe('the app adds at any time', () => {
  it('R11: the app adds while the session is idle, running, or paused on a client tool; each reaches the next model call', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'ask_user', client: true, deadlineMs: 60_000 }] } });
    // Idle: nothing has run yet.
    expect(await addContext(s, s.sessionId, [notice('idle')])).toBe(1);
    await message(s, s.sessionId, 'user', 'Start');
    expect((await step(s, s.sessionId)).rows.map((r) => r.content)).toEqual(['idle']);
    // Running: between two steps of one run.
    expect(await addContext(s, s.sessionId, [notice('running')])).toBe(1);
    expect((await step(s, s.sessionId)).rows.map((r) => r.content)).toEqual(['running']);
    // Paused on a client tool.
    expect((await gate(s, s.sessionId, 'c1', 'ask_user')).client).toBe(true);
    expect((await inspect(s, s.sessionId)).calls[0]!.status).toBe('awaiting_client');
    expect(await addContext(s, s.sessionId, [notice('paused')])).toBe(1);
    await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c1/answer`, { content: 'answer' });
    const resumed = await step(s, s.sessionId);
    expect(resumed.rows.map((r) => r.content)).toEqual(['paused']);
    expect(resumed.request.messages.slice(-2).map((m) => m.role)).toEqual(['tool', 'system']);
  });
});
