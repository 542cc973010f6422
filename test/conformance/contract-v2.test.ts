/**
 * Contract v2 (docs/contract-v2.md): tool schemas, tool calls that round-trip, every call
 * answered, the neutral request and its cache hints: the default step answer (`format: "neutral"`
 * names it). It keeps every v1 field (the other conformance files prove them), v2 only adds fields.
 * Each test names the requirement its rule serves.
 *
 * Longer than 400 lines: one test or more per v2 rule, each short; the file is the v2 contract read top to bottom.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  addContext,
  disableTools,
  expectError,
  gate,
  type Item,
  instruction,
  message,
  notice,
  openSession,
  type Session,
  state,
  step,
  streamChunks,
} from './support.ts';

const FINISH = {
  name: '__finish__',
  description: 'Call when the task is complete.',
  parameters: {
    type: 'object',
    properties: { result: { type: 'string', description: 'The final answer, or a summary of what was done.' } },
    additionalProperties: false,
  },
};

const SEARCH_PARAMETERS = {
  type: 'object',
  properties: { query: { type: 'string', minLength: 1 }, limit: { type: 'integer', maximum: 50 } },
  required: ['query'],
  additionalProperties: false,
};

const AGENT = {
  context: 'You help with tickets.',
  model: 'gpt-test',
  tools: [
    { name: 'search', description: 'Search tickets.', parameters: SEARCH_PARAMETERS, strict: true },
    { name: 'ask_user', client: true, deadlineMs: 1000, parameters: { type: 'object', properties: {} } },
    { name: 'refund', needsApproval: true },
  ],
};

type Neutral = {
  stepId: string;
  rows: Item[];
  request: {
    messages: Item[];
    tools: Item[];
    activeTools: string[];
    system: string;
    model: string | null;
    toolChoice: unknown;
  };
  cursor: unknown;
  cache: { rebuilt: boolean; reason: string | null; key: string; prefixEnd: number; previousEnd: number };
};

/** `POST /sessions/:id/steps` with `format: "neutral"` (the default, named), expecting 200. */
async function neutral(s: Session, body: Item = {}): Promise<Neutral> {
  const answer = await s.call('POST', `/sessions/${s.sessionId}/steps`, { format: 'neutral', ...body });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body;
}

/** `POST /sessions/:id/messages` with `{ messages }`. */
function record(s: Session, messages: Item[]) {
  return s.call('POST', `/sessions/${s.sessionId}/messages`, { messages });
}

const SYSTEM = { role: 'system', content: 'You help with tickets.' };
const searchCall = (callId: string, query = 'refunds') => ({
  callId,
  name: 'search',
  arguments: JSON.stringify({ query }),
});

describe('Contract v2: tools', () => {
  it('R16: request.tools carries each declared tool with its parameters and strict unchanged; __finish__ has parameters; the default answer is the neutral one and keeps the v1 { name, description }', async () => {
    const s = await openSession({ agent: AGENT });
    const answer = await neutral(s);
    expect(answer.request.tools).toEqual([
      { name: 'search', description: 'Search tickets.', parameters: SEARCH_PARAMETERS, strict: true },
      { name: 'ask_user', parameters: { type: 'object', properties: {} } },
      { name: 'refund' },
      FINISH,
    ]);
    expect(answer.request.activeTools).toEqual(['search', 'ask_user', 'refund', '__finish__']);
    const plain = await step(s, s.sessionId);
    expect(plain.request.tools).toEqual(answer.request.tools);
    // The v1 fields, as v1 answered them.
    expect(plain.request.tools.map((t: Item) => ({ name: t.name, description: t.description }))).toEqual([
      { name: 'search', description: 'Search tickets.' },
      { name: 'ask_user', description: undefined },
      { name: 'refund', description: undefined },
      { name: '__finish__', description: 'Call when the task is complete.' },
    ]);
    expect(Object.keys(plain.request)).toEqual(['messages', 'tools', 'activeTools', 'system', 'model', 'toolChoice']);
  });

  it('R16: a tool name outside ^[A-Za-z0-9_-]{1,64}$, parameters that are not a JSON Schema of type object, or over 64 KiB: 400 validation_error', async () => {
    const s = await openSession();
    const refused = async (tool: Item, says: string) => {
      const answer = await s.call('POST', '/agents', { tools: [tool] });
      expectError(answer, 400, 'validation_error');
      expect(answer.body.error.message).toBe(says);
    };
    await refused({ name: 'files.read' }, 'tools.0.name: tool names are 1 to 64 letters, digits, _ or -');
    await refused({ name: 'a'.repeat(65) }, 'tools.0.name: tool names are 1 to 64 letters, digits, _ or -');
    await refused(
      { name: 'x', parameters: { type: 'string' } },
      'tools.0.parameters: must be a JSON Schema with "type": "object"',
    );
    await refused(
      { name: 'x', parameters: { type: 'object', properties: { a: { type: 'text' } } } },
      'tools.0.parameters: is not a JSON Schema: parameters/properties/*/type must be equal to one of the allowed values, ' +
        'parameters/properties/*/type must be array, parameters/properties/*/type must match a schema in anyOf',
    );
    await refused(
      { name: 'x', parameters: { type: 'object', required: 'a' } },
      'tools.0.parameters: is not a JSON Schema: parameters/required must be array',
    );
    await refused(
      { name: 'x', parameters: { $schema: 'https://example.com/other', type: 'object' } },
      'tools.0.parameters: is not a JSON Schema: its $schema is not draft 2020-12',
    );
    await refused({ name: 'x', parameters: [] }, 'tools.0.parameters: Invalid input: expected record, received array');
    const overhead = JSON.stringify({ type: 'object', description: '' }).length;
    const big = { type: 'object', description: 'd'.repeat(64 * 1024 - overhead + 1) };
    await refused(
      { name: 'x', parameters: big },
      'tools.0.parameters: is 65537 bytes of JSON, over the 65536-byte limit',
    );
    // At the limit: accepted.
    const fits = { type: 'object', description: 'd'.repeat(64 * 1024 - overhead) };
    expect((await s.call('POST', '/agents', { tools: [{ name: 'x', parameters: fits }] })).status).toBe(201);
  });
});

describe('Contract v2: tool calls round-trip', () => {
  it('R3: an assistant turn with its tool results is recorded in one request and one store write; the neutral request keeps toolCalls, callId and name', async () => {
    const s = await openSession({ agent: AGENT });
    await message(s, s.sessionId, 'user', 'Any refunds?');
    await neutral(s);
    let writes = 0;
    const append = s.store.appendMessages.bind(s.store) as (...args: unknown[]) => Promise<unknown>;
    s.store.appendMessages = ((...args: unknown[]) => {
      writes += 1;
      return append(...args);
    }) as typeof s.store.appendMessages;
    const recorded = await record(s, [
      { role: 'assistant', content: 'Searching.', toolCalls: [searchCall('c1'), searchCall('c2', 'open')] },
      { role: 'tool', callId: 'c1', content: '2 refunds' },
      { role: 'tool', callId: 'c2', content: '5 open' },
    ]);
    expect(recorded).toEqual({ status: 201, body: { seqs: [1, 2, 3] } });
    expect(writes).toBe(1);
    const answer = await neutral(s);
    expect(answer.request.messages).toEqual([
      SYSTEM,
      { role: 'user', content: 'Any refunds?' },
      {
        role: 'assistant',
        content: 'Searching.',
        toolCalls: [
          { callId: 'c1', name: 'search', arguments: '{"query":"refunds"}' },
          { callId: 'c2', name: 'search', arguments: '{"query":"open"}' },
        ],
      },
      { role: 'tool', content: '2 refunds', callId: 'c1', name: 'search' },
      { role: 'tool', content: '5 open', callId: 'c2', name: 'search' },
    ]);
    const messages = (await s.call('GET', `/sessions/${s.sessionId}/messages`)).body.messages;
    expect(messages.slice(1).map(({ at: _at, ...m }: Item) => m)).toEqual([
      { seq: 1, role: 'assistant', content: 'Searching.', toolCalls: [searchCall('c1'), searchCall('c2', 'open')] },
      { seq: 2, role: 'tool', content: '2 refunds', callId: 'c1', name: 'search' },
      { seq: 3, role: 'tool', content: '5 open', callId: 'c2', name: 'search' },
    ]);
    // Results recorded out of call order are sent in call order (all of a turn's results are in the
    // log before a request holds them).
    await record(s, [
      { role: 'assistant', content: '', toolCalls: [searchCall('o1'), searchCall('o2', 'two')] },
      { role: 'tool', callId: 'o2', content: 'second' },
      { role: 'tool', callId: 'o1', content: 'first' },
    ]);
    const ordered = await neutral(s);
    expect(ordered.request.messages.slice(-2)).toEqual([
      { role: 'tool', content: 'first', callId: 'o1', name: 'search' },
      { role: 'tool', content: 'second', callId: 'o2', name: 'search' },
    ]);
    expect(
      JSON.stringify(ordered.request.messages).startsWith(JSON.stringify(answer.request.messages).slice(0, -1)),
    ).toBe(true);
    // v1 bodies stay valid: one message, answered { seq }; toolCalls without arguments send '{}'.
    expect(
      await s.call('POST', `/sessions/${s.sessionId}/messages`, {
        role: 'assistant',
        content: '',
        toolCalls: [{ callId: 'c3', name: 'search' }],
      }),
    ).toEqual({ status: 201, body: { seq: 7 } });
    expect(
      await s.call('POST', `/sessions/${s.sessionId}/messages`, { role: 'tool', content: 'none', callId: 'c3' }),
    ).toEqual({
      status: 201,
      body: { seq: 8 },
    });
    expect((await neutral(s)).request.messages.slice(-2)).toEqual([
      { role: 'assistant', content: '', toolCalls: [{ callId: 'c3', name: 'search', arguments: '{}' }] },
      { role: 'tool', content: 'none', callId: 'c3', name: 'search' },
    ]);
  });

  it('R3: a tool message whose callId matches no earlier call, arguments that are not a JSON object, a reused callId: 400 validation_error, nothing written', async () => {
    const s = await openSession({ agent: AGENT });
    await record(s, [{ role: 'assistant', content: '', toolCalls: [searchCall('c1')] }]);
    const before = await state(s, s.sessionId);
    const orphan = await s.call('POST', `/sessions/${s.sessionId}/messages`, {
      role: 'tool',
      callId: 'nope',
      content: 'x',
    });
    expectError(orphan, 400, 'validation_error');
    expect(orphan.body.error.message).toBe(
      'message: callId matches no call of an earlier assistant message and no call the gate knows',
    );
    // In a batch, nothing of it is written.
    const batch = await record(s, [
      { role: 'tool', callId: 'c1', content: 'ok' },
      { role: 'tool', callId: 'nope', content: 'x' },
    ]);
    expectError(batch, 400, 'validation_error');
    expect(batch.body.error.message).toBe(
      'messages.1: callId matches no call of an earlier assistant message and no call the gate knows',
    );
    const badArguments = await record(s, [
      { role: 'tool', callId: 'c1', content: 'ok' },
      { role: 'assistant', content: '', toolCalls: [{ callId: 'c2', name: 'search', arguments: '[1]' }] },
    ]);
    expectError(badArguments, 400, 'validation_error');
    expect(badArguments.body.error.message).toBe(
      'messages.1.toolCalls.0.arguments: arguments must be the JSON text of an object',
    );
    const reused = await record(s, [
      { role: 'tool', callId: 'c1', content: 'ok' },
      { role: 'assistant', content: '', toolCalls: [searchCall('c1')] },
    ]);
    expectError(reused, 400, 'validation_error');
    expect(reused.body.error.message).toBe('messages.1: toolCalls.0.callId is already used by another call');
    expect(await state(s, s.sessionId)).toEqual(before);
  });

  it('R3: a second result for an answered call: the same content records nothing (its seq is answered), other content is 400', async () => {
    const s = await openSession({ agent: AGENT });
    await neutral(s);
    await record(s, [
      { role: 'assistant', content: '', toolCalls: [{ callId: 'q1', name: 'ask_user', arguments: '{}' }] },
    ]);
    expect(await gate(s, s.sessionId, 'q1', 'ask_user')).toMatchObject({ execute: true, client: true });
    // The on-time client answer is recorded by ctxflow as the call's result.
    expect((await s.call('POST', `/sessions/${s.sessionId}/tool-calls/q1/answer`, { content: 'Friday' })).body).toEqual(
      {
        late: false,
        recorded: 1,
      },
    );
    const before = await state(s, s.sessionId);
    expect(
      await s.call('POST', `/sessions/${s.sessionId}/messages`, { role: 'tool', callId: 'q1', content: 'Friday' }),
    ).toEqual({
      status: 201,
      body: { seq: 1 },
    });
    const other = await s.call('POST', `/sessions/${s.sessionId}/messages`, {
      role: 'tool',
      callId: 'q1',
      content: 'Monday',
    });
    expectError(other, 400, 'validation_error');
    expect(other.body.error.message).toBe(
      'message: the call of callId already has a result (seq 1); a second result is refused',
    );
    expect(await state(s, s.sessionId)).toEqual(before);
    expect((await neutral(s)).request.messages.slice(1)).toEqual([
      { role: 'assistant', content: '', toolCalls: [{ callId: 'q1', name: 'ask_user', arguments: '{}' }] },
      { role: 'tool', content: 'Friday', callId: 'q1', name: 'ask_user' },
    ]);
    // A result the runtime recorded first stays the only one: the client's answer then records nothing.
    await record(s, [
      { role: 'assistant', content: '', toolCalls: [{ callId: 'q2', name: 'ask_user', arguments: '{}' }] },
    ]);
    await gate(s, s.sessionId, 'q2', 'ask_user');
    await record(s, [{ role: 'tool', callId: 'q2', content: 'from the runtime' }]);
    expect(
      (await s.call('POST', `/sessions/${s.sessionId}/tool-calls/q2/answer`, { content: 'from the client' })).body,
    ).toEqual({
      late: false,
      recorded: 0,
    });
    expect((await neutral(s)).request.messages.slice(-1)).toEqual([
      { role: 'tool', content: 'from the runtime', callId: 'q2', name: 'ask_user' },
    ]);
  });
});

describe('Contract v2: every tool call has exactly one result', () => {
  it('R17: calls the gate refused get a result from ctxflow naming why (tool_inactive, tool_unavailable), in call order, before the step rows', async () => {
    const s = await openSession({ agent: AGENT });
    await addContext(s, s.sessionId, [disableTools(['search'])]);
    await neutral(s);
    await record(s, [
      {
        role: 'assistant',
        content: '',
        toolCalls: [
          searchCall('c1'),
          { callId: 'c2', name: 'delete_all', arguments: '{}' },
          { callId: 'c3', name: 'refund', arguments: '{}' },
        ],
      },
    ]);
    expect(await gate(s, s.sessionId, 'c1', 'search')).toEqual({ execute: false, reason: 'tool_inactive' });
    expect(await gate(s, s.sessionId, 'c2', 'delete_all')).toEqual({ execute: false, reason: 'tool_unavailable' });
    expect(await gate(s, s.sessionId, 'c3', 'refund')).toEqual({ execute: false, reason: 'approval_required' });
    expect(await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c3/approval`, { approved: false })).toEqual({
      status: 200,
      body: { execute: false, reason: 'approval_denied' },
    });
    await addContext(s, s.sessionId, [notice('Refunds are paused.')]);
    const answer = await neutral(s);
    expect(answer.request.messages.slice(3)).toEqual([
      {
        role: 'tool',
        content: 'Not executed (tool_inactive): the tool search is switched off.',
        callId: 'c1',
        name: 'search',
      },
      {
        role: 'tool',
        content: 'Not executed (tool_unavailable): no tool named delete_all is offered.',
        callId: 'c2',
        name: 'delete_all',
      },
      {
        role: 'tool',
        content: 'Not executed (approval_denied): the call to refund was not approved.',
        callId: 'c3',
        name: 'refund',
      },
      {
        role: 'system',
        content: '<context kind="notice" source="app">\nRefunds are paused.\n</context>',
        row: { id: answer.rows[0]!.id, kind: 'notice', source: 'app' },
      },
    ]);
    const logged = (await s.call('GET', `/sessions/${s.sessionId}/messages`)).body.messages;
    expect(logged.slice(1).map((m: Item) => [m.callId, m.outcome])).toEqual([
      ['c1', 'tool_inactive'],
      ['c2', 'tool_unavailable'],
      ['c3', 'approval_denied'],
    ]);
    // They are messages on the stream like any other (never a row, R4).
    const { chunks } = await streamChunks(s, s.sessionId);
    expect(
      chunks.filter((c) => c.event === 'message' && c.data.role === 'tool').map((c) => [c.data.seq, c.data.content]),
    ).toEqual(logged.slice(1).map((m: Item) => [m.seq, m.content]));
    // Recorded once: the next step adds nothing.
    expect((await neutral(s)).request.messages).toHaveLength(answer.request.messages.length);
  });

  it('R35: a client call past its deadline gets a result naming the deadline miss at the next step; the late answer still comes as a late-answer row', async () => {
    const s = await openSession({ agent: AGENT });
    await neutral(s);
    await record(s, [
      { role: 'assistant', content: 'Asking.', toolCalls: [{ callId: 'q1', name: 'ask_user', arguments: '{}' }] },
    ]);
    const decision = await gate(s, s.sessionId, 'q1', 'ask_user');
    s.clock.advance(1001);
    const missed = await neutral(s);
    expect(missed.rows).toEqual([]);
    expect(missed.request.messages.at(-1)).toEqual({
      role: 'tool',
      content: `No answer (deadline_missed): the client did not answer ask_user by its deadline ${decision.deadlineAt}; a later answer comes as a context notice.`,
      callId: 'q1',
      name: 'ask_user',
    });
    expect((await s.call('POST', `/sessions/${s.sessionId}/tool-calls/q1/answer`, { content: 'Friday' })).body).toEqual(
      {
        late: true,
        recorded: 1,
      },
    );
    const late = await neutral(s);
    expect(late.request.messages.slice(missed.request.messages.length)).toEqual([
      {
        role: 'user',
        content:
          '<context kind="notice" source="late-answer">\nLate answer from tool ask_user (call q1), after its deadline:\nFriday\n</context>',
        row: { id: late.rows[0]!.id, kind: 'notice', source: 'late-answer' },
      },
    ]);
  });

  it('R35: a late answer that comes before the next step: the deadline result first, then the late-answer row, in one step', async () => {
    const s = await openSession({ agent: AGENT });
    await neutral(s);
    await record(s, [
      { role: 'assistant', content: '', toolCalls: [{ callId: 'q1', name: 'ask_user', arguments: '{}' }] },
    ]);
    await gate(s, s.sessionId, 'q1', 'ask_user');
    s.clock.advance(5000);
    await s.call('POST', `/sessions/${s.sessionId}/tool-calls/q1/answer`, { content: 'Friday' });
    const answer = await neutral(s);
    expect(answer.request.messages.slice(2).map((m) => [m.role, m.callId ?? m.row])).toEqual([
      ['tool', 'q1'],
      ['user', { id: answer.rows[0]!.id, kind: 'notice', source: 'late-answer' }],
    ]);
  });

  it('R11: while a call of the last assistant message waits (client before its deadline, approval, or no result recorded), a step and a user message are 409 state_calls_pending naming the calls, nothing written; the app still adds', async () => {
    const s = await openSession({ agent: AGENT });
    await neutral(s);
    await record(s, [
      {
        role: 'assistant',
        content: '',
        toolCalls: [
          { callId: 'q1', name: 'ask_user', arguments: '{}' },
          { callId: 'r1', name: 'refund', arguments: '{}' },
          searchCall('s1'),
        ],
      },
    ]);
    await gate(s, s.sessionId, 'q1', 'ask_user');
    await gate(s, s.sessionId, 'r1', 'refund');
    const before = await state(s, s.sessionId);
    const pending = [
      { callId: 'q1', name: 'ask_user', status: 'awaiting_client' },
      { callId: 'r1', name: 'refund', status: 'awaiting_approval' },
      { callId: 's1', name: 'search', status: 'no_result' },
    ];
    const refusedStep = await s.call('POST', `/sessions/${s.sessionId}/steps`, { format: 'neutral' });
    expectError(refusedStep, 409, 'state_calls_pending');
    expect(refusedStep.body.error.details).toEqual({ pending });
    expect(refusedStep.body.error.message).toBe(
      "step: 3 calls of the last assistant message have no result yet (details.pending); record their results (POST /sessions/:sessionId/messages), or wait for the client's answer, its deadline or the approval, then send it again",
    );
    expectError(await s.call('POST', `/sessions/${s.sessionId}/steps`, {}), 409, 'state_calls_pending');
    const refusedUser = await s.call('POST', `/sessions/${s.sessionId}/messages`, { role: 'user', content: 'Hello?' });
    expectError(refusedUser, 409, 'state_calls_pending');
    expect(refusedUser.body.error.details).toEqual({ pending });
    expect(await state(s, s.sessionId)).toEqual(before);
    expect(await addContext(s, s.sessionId, [instruction('Be patient.')])).toBe(1);

    await s.call('POST', `/sessions/${s.sessionId}/tool-calls/q1/answer`, { content: 'Friday' });
    await s.call('POST', `/sessions/${s.sessionId}/tool-calls/r1/approval`, { approved: true });
    await record(s, [
      { role: 'tool', callId: 'r1', content: 'refunded' },
      { role: 'tool', callId: 's1', content: '3 hits' },
    ]);
    const answer = await neutral(s);
    expect(answer.request.messages.slice(2).map((m) => [m.role, m.callId ?? m.content])).toEqual([
      ['tool', 'q1'],
      ['tool', 'r1'],
      ['tool', 's1'],
      ['system', '<context kind="instruction" source="app">\nBe patient.\n</context>'],
    ]);
  });

  it('R20: a __finish__ call gets the result "Finished." from ctxflow when the turn closes (the next user message)', async () => {
    const s = await openSession({ agent: AGENT });
    await neutral(s, { mode: 'forced_completion' });
    await record(s, [
      {
        role: 'assistant',
        content: '',
        toolCalls: [{ callId: 'f1', name: '__finish__', arguments: '{"result":"done"}' }],
      },
    ]);
    expect(await message(s, s.sessionId, 'user', 'One more thing')).toEqual({ seq: 2 });
    expect((await neutral(s)).request.messages.slice(1)).toEqual([
      {
        role: 'assistant',
        content: '',
        toolCalls: [{ callId: 'f1', name: '__finish__', arguments: '{"result":"done"}' }],
      },
      { role: 'tool', content: 'Finished.', callId: 'f1', name: '__finish__' },
      { role: 'user', content: 'One more thing' },
    ]);
  });

  it('R17: a tool result without its call in the assistant turn before it (a client answer to a call the gate knows, a v1 result) is sent as recorded, role tool, with the callId and name known', async () => {
    const s = await openSession({ agent: AGENT });
    await gate(s, s.sessionId, 'q1', 'ask_user');
    await s.call('POST', `/sessions/${s.sessionId}/tool-calls/q1/answer`, { content: 'On time.' });
    await message(s, s.sessionId, 'tool', 'no call', {});
    const answer = await neutral(s);
    expect(answer.request.messages.slice(1)).toEqual([
      { role: 'tool', content: 'On time.', callId: 'q1', name: 'ask_user' },
      { role: 'tool', content: 'no call' },
    ]);
    // The default answer: the same messages (v1's role and content, fields added).
    expect((await step(s, s.sessionId)).request.messages).toEqual(answer.request.messages);
  });
});

describe('Contract v2: data written before', () => {
  it('R3: entries written before v2 (tool calls without arguments, tool results without name) are read: the neutral request pairs them by callId', async () => {
    const s = await openSession({ agent: AGENT });
    const at = new Date(s.clock.now()).toISOString();
    // As a v1 runner stored them: no `arguments`, no `name`.
    await s.store.appendMessages(s.sessionId, [
      { type: 'message', role: 'user', content: 'Hi', at },
      { type: 'message', role: 'assistant', content: '', toolCalls: [{ callId: 'o1', name: 'search' }], at },
      { type: 'message', role: 'tool', content: 'old result', callId: 'o1', at },
    ]);
    const answer = await neutral(s);
    expect(answer.request.messages).toEqual([
      SYSTEM,
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: '', toolCalls: [{ callId: 'o1', name: 'search', arguments: '{}' }] },
      { role: 'tool', content: 'old result', callId: 'o1', name: 'search' },
    ]);
    // The turn is closed: a new turn is recorded after it.
    expect((await record(s, [{ role: 'user', content: 'Next' }])).status).toBe(201);
  });
});

describe('Contract v2: the neutral request', () => {
  it('R6: context-row messages carry row { id, kind, source } with the R6 roles; system, model and toolChoice; the default answer carries them too', async () => {
    const s = await openSession({ agent: AGENT });
    await addContext(s, s.sessionId, [instruction('Be brief.')]);
    s.hook.script = () => ({ items: [notice('Ticket 7 reopened.')], cursor: 1 });
    const answer = await neutral(s);
    expect(answer.request.system).toBe('You help with tickets.');
    expect(answer.request.model).toBe('gpt-test');
    expect(answer.request.toolChoice).toBe('auto');
    expect(answer.request.messages).toEqual([
      SYSTEM,
      {
        role: 'system',
        content: '<context kind="instruction" source="app">\nBe brief.\n</context>',
        row: { id: answer.rows[0]!.id, kind: 'instruction', source: 'app' },
      },
      {
        role: 'system',
        content: '<context kind="notice" source="hook">\nTicket 7 reopened.\n</context>',
        row: { id: answer.rows[1]!.id, kind: 'notice', source: 'hook' },
      },
    ]);
    await s.call('POST', `/sessions/${s.sessionId}/tool-calls/t1/context`, { items: [notice('tool note')] });
    s.hook.script = () => undefined;
    const plain = await step(s, s.sessionId);
    expect(plain.request.messages.at(-1)).toEqual({
      role: 'user',
      content: '<context kind="notice" source="tool">\ntool note\n</context>',
      row: { id: plain.rows[0]!.id, kind: 'notice', source: 'tool' },
    });
    expect([plain.request.system, plain.request.model, plain.request.toolChoice]).toEqual([
      'You help with tickets.',
      'gpt-test',
      'auto',
    ]);
    const after = await neutral(s);
    expect(after.request.messages.at(-1)).toEqual({
      role: 'user',
      content: '<context kind="notice" source="tool">\ntool note\n</context>',
      row: { id: plain.rows[0]!.id, kind: 'notice', source: 'tool' },
    });
  });

  it('R20: forced completion asks for the completion tool: toolChoice { type: "tool", name: "__finish__" }; without an agent model is null and system is ""', async () => {
    const s = await openSession({ agent: AGENT });
    expect((await neutral(s, { mode: 'forced_completion' })).request.toolChoice).toEqual({
      type: 'tool',
      name: '__finish__',
    });
    expect((await neutral(s, { mode: 'retry' })).request.toolChoice).toBe('auto');
    const bare = await openSession();
    const answer = await neutral(bare);
    expect(answer.request).toEqual({
      messages: [],
      tools: [FINISH],
      activeTools: ['__finish__'],
      system: '',
      model: null,
      toolChoice: 'auto',
    });
    expect(answer.cache).toMatchObject({ prefixEnd: -1, previousEnd: 0 });
  });

  it('N4: cache hints: rebuilt and reason, a key stable for the session (<= 64 chars), prefixEnd and previousEnd; the default answer has them (v1 rebuilt kept, reason null when not rebuilt)', async () => {
    const s = await openSession({ agent: AGENT });
    await message(s, s.sessionId, 'user', 'Hi');
    const first = await neutral(s);
    expect(first.cache).toEqual({
      rebuilt: true,
      reason: 'new_thread',
      key: first.cache.key,
      prefixEnd: 0,
      previousEnd: 0,
    });
    expect(first.cache.key).toMatch(/^ctxflow-[0-9a-f]{32}$/);
    await record(s, [{ role: 'assistant', content: 'Hello.' }]);
    const second = await neutral(s);
    expect(second.cache).toEqual({ rebuilt: false, reason: null, key: first.cache.key, prefixEnd: 0, previousEnd: 2 });
    expect(second.request.messages).toHaveLength(3);
    const plain = await step(s, s.sessionId);
    expect(plain.cache).toEqual({ rebuilt: false, reason: null, key: first.cache.key, prefixEnd: 0, previousEnd: 3 });
    expect((await s.call('PATCH', `/sessions/${s.sessionId}`, { forceRefresh: true })).status).toBe(200);
    expect((await neutral(s)).cache).toEqual({
      rebuilt: true,
      reason: 'force_refresh',
      key: first.cache.key,
      prefixEnd: 0,
      previousEnd: 3,
    });
    const other = await openSession({ agent: AGENT });
    expect((await neutral(other)).cache.key).not.toBe(first.cache.key);
  });

  it('R33: a redelivered request id answers the same neutral step again, cache hints included, with or without the format; the restart route answers the neutral step too', async () => {
    const s = await openSession({ agent: AGENT });
    await message(s, s.sessionId, 'user', 'Hi');
    await neutral(s);
    await addContext(s, s.sessionId, [notice('n1')]);
    const answer = await neutral(s, { requestId: 'req-1' });
    await addContext(s, s.sessionId, [notice('n2')]);
    expect(await neutral(s, { requestId: 'req-1' })).toEqual(answer);
    expect(await step(s, s.sessionId, { requestId: 'req-1' })).toEqual(answer);
    const restarted = await s.call('POST', `/sessions/${s.sessionId}/runs/restart`, { format: 'neutral' });
    expect(restarted.status).toBe(200);
    expect(restarted.body.cache).toMatchObject({ key: answer.cache.key, prefixEnd: 0 });
    expect(restarted.body.request.toolChoice).toBe('auto');
    const plain = await s.call('POST', `/sessions/${s.sessionId}/runs/restart`, {});
    expect(plain.status).toBe(200);
    expect(plain.body.cache).toEqual({
      rebuilt: false,
      reason: null,
      key: answer.cache.key,
      prefixEnd: 0,
      previousEnd: 2,
    });
    expect(Object.keys(plain.body.request)).toEqual([
      'messages',
      'tools',
      'activeTools',
      'system',
      'model',
      'toolChoice',
    ]);
  });

  it('R3: property: turns with tool calls, results, refusals, missed deadlines and rows keep every neutral request a byte prefix of the next, every call answered once, in call order', async () => {
    const call = fc.record({
      tool: fc.constantFrom('search', 'ask_user', 'refund', 'zz'),
      answer: fc.constantFrom('runtime', 'client', 'late', 'deny'),
    });
    const op = fc.oneof(
      fc.record({ type: fc.constant('user' as const), text: fc.string({ maxLength: 20 }) }),
      fc.record({ type: fc.constant('app' as const), off: fc.boolean() }),
      fc.record({ type: fc.constant('turn' as const), calls: fc.array(call, { maxLength: 3 }) }),
      fc.record({ type: fc.constant('step' as const), forced: fc.boolean() }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 12 }), async (ops) => {
        const s = await openSession({ agent: AGENT });
        let previous: string | undefined;
        let ids = 0;
        const check = async (forced = false) => {
          const answer = await neutral(s, forced ? { mode: 'forced_completion' } : {});
          const text = JSON.stringify(answer.request.messages);
          if (previous !== undefined) expect(text.startsWith(previous.slice(0, -1))).toBe(true);
          expect(answer.cache.previousEnd).toBe(previous === undefined ? 0 : JSON.parse(previous).length);
          previous = text;
          // Every call has exactly one result right after its assistant message, in call order, and
          // every tool message answers a call.
          const messages = answer.request.messages;
          let open: string[] = [];
          for (const m of messages) {
            if (m.role === 'tool') {
              expect(m.callId).toBe(open[0]);
              open = open.slice(1);
            } else {
              expect(open).toEqual([]);
              open = ((m.toolCalls as { callId: string }[] | undefined) ?? []).map((c) => c.callId);
            }
          }
          expect(open).toEqual([]);
        };
        for (const o of ops) {
          if (o.type === 'user') await message(s, s.sessionId, 'user', o.text);
          else if (o.type === 'app')
            await addContext(s, s.sessionId, [o.off ? disableTools(['search']) : notice('app note')]);
          else if (o.type === 'step') await check(o.forced);
          else {
            const calls = o.calls.map((c) => ({ ...c, callId: `c${++ids}` }));
            const recorded = await record(s, [
              {
                role: 'assistant',
                content: '',
                toolCalls: calls.map((c) => ({ callId: c.callId, name: c.tool, arguments: '{}' })),
              },
            ]);
            expect(recorded.status, JSON.stringify(recorded.body)).toBe(201);
            const results: Item[] = [];
            for (const c of calls) {
              const decision = await gate(s, s.sessionId, c.callId, c.tool);
              if (decision.reason === 'approval_required') {
                const approved = await s.call('POST', `/sessions/${s.sessionId}/tool-calls/${c.callId}/approval`, {
                  approved: c.answer !== 'deny',
                });
                if (approved.body.execute) results.push({ role: 'tool', callId: c.callId, content: 'ran' });
              } else if (decision.client && c.answer === 'client') {
                await s.call('POST', `/sessions/${s.sessionId}/tool-calls/${c.callId}/answer`, { content: 'answer' });
              } else if (decision.execute && !decision.client) {
                results.push({ role: 'tool', callId: c.callId, content: 'ran' });
              }
            }
            if (results.length > 0) expect((await record(s, results)).status).toBe(201);
            // Unanswered client calls miss their deadline.
            s.clock.advance(1001);
          }
        }
        await check();
      }),
      { numRuns: 25 },
    );
  });
});
