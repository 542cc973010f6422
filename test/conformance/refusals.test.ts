/**
 * Bad input never changes state: every refusal of the error table (README.md
 * "HTTP API", error codes) answers its code and writes nothing; each test checks the log,
 * the queue, the calls and the steps afterwards. R9 (items refused when added)
 * and R14 (invalid 400, unknown session 404, nothing recorded on any refusal).
 */
import { describe, expect, it } from 'vitest';
import {
  addContext,
  disableTools,
  expectError,
  gate,
  notice,
  openSession,
  type Session,
  state,
  step,
} from './support.ts';

const MAX_ITEM_BYTES = 32 * 1024;

/** A notice whose JSON is exactly `bytes` long (UTF-8). */
function noticeOfBytes(bytes: number, fill = 'x') {
  const empty = Buffer.byteLength(JSON.stringify({ kind: 'notice', content: '' }));
  const unit = Buffer.byteLength(fill);
  const count = Math.floor((bytes - empty) / unit);
  const item = { kind: 'notice', content: fill.repeat(count) + 'x'.repeat(bytes - empty - count * unit) };
  expect(Buffer.byteLength(JSON.stringify(item))).toBe(bytes);
  return item;
}

/** A session with a committed step, a tool call, and an item still queued. */
async function busySession(): Promise<Session & { stepId: string }> {
  const s = await openSession({
    agent: { tools: [{ name: 'search' }, { name: 'refund', needsApproval: true }] },
  });
  await addContext(s, s.sessionId, [notice('delivered')], 'k1');
  const { stepId } = await step(s, s.sessionId);
  await gate(s, s.sessionId, 'c1', 'search');
  await addContext(s, s.sessionId, [notice('queued')]);
  return Object.assign(s, { stepId });
}

/** Sends one refused request and checks its code and that nothing changed. */
async function refused(s: Session, method: string, url: string, body: unknown, status: number, code: string) {
  const before = await state(s, s.sessionId);
  const answer = await s.call(method, url, body);
  expectError(answer, status, code);
  expect(await state(s, s.sessionId), `${method} ${url} ${JSON.stringify(body)?.slice(0, 200)}`).toEqual(before);
}

describe('refusals write nothing', () => {
  it('R9: an unknown kind is a validation_error and nothing is queued (app, tool, hook)', async () => {
    const s = await busySession();
    const bad = [notice('fine'), { kind: 'shout', content: 'LOUD' }];
    await refused(s, 'POST', '/context', { sessionId: s.sessionId, items: bad }, 400, 'validation_error');
    await refused(s, 'POST', `/sessions/${s.sessionId}/tool-calls/c1/context`, { items: bad }, 400, 'validation_error');
    await refused(
      s,
      'POST',
      `/sessions/${s.sessionId}/tool-calls/c1/context`,
      { origin: 'hook', items: bad },
      400,
      'validation_error',
    );
    const answer = await s.call('POST', '/context', { sessionId: s.sessionId, items: bad });
    expect(answer.body.error.message).toMatch(/^items\[1\]: .*kind/);
  });

  it('R9: a tools item switching __finish__ off is a validation_error and nothing is queued (app, tool, hook)', async () => {
    const s = await busySession();
    const bad = [disableTools(['search', '__finish__'])];
    await refused(s, 'POST', '/context', { sessionId: s.sessionId, items: bad }, 400, 'validation_error');
    await refused(s, 'POST', `/sessions/${s.sessionId}/tool-calls/c1/context`, { items: bad }, 400, 'validation_error');
    await refused(
      s,
      'POST',
      `/sessions/${s.sessionId}/tool-calls/c1/context`,
      { origin: 'hook', items: bad },
      400,
      'validation_error',
    );
  });

  it('R9: an item over 32 KiB is a validation_error and nothing is queued; an item of exactly 32 KiB is accepted', async () => {
    const s = await busySession();
    for (const over of [noticeOfBytes(MAX_ITEM_BYTES + 1), noticeOfBytes(MAX_ITEM_BYTES + 1, 'é')]) {
      await refused(
        s,
        'POST',
        '/context',
        { sessionId: s.sessionId, items: [notice('ok'), over] },
        400,
        'validation_error',
      );
      await refused(
        s,
        'POST',
        `/sessions/${s.sessionId}/tool-calls/c1/context`,
        { items: [over] },
        400,
        'validation_error',
      );
    }
    expect(await addContext(s, s.sessionId, [noticeOfBytes(MAX_ITEM_BYTES)])).toBe(1);
  });

  it('R9: a refused tool or hook addContext does not use up its call site', async () => {
    const s = await busySession();
    await refused(
      s,
      'POST',
      `/sessions/${s.sessionId}/tool-calls/c1/context`,
      { items: [{ kind: 'shout' }] },
      400,
      'validation_error',
    );
    const answer = await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c1/context`, { items: [notice('valid')] });
    expect(answer.body).toEqual({ recorded: 1 });
  });

  it('R14: a bad body on any route is 400 validation_error and writes nothing', async () => {
    const s = await busySession();
    const sid = s.sessionId;
    const cases: [string, string, unknown][] = [
      ['POST', '/context', { items: [notice('x')] }],
      ['POST', '/context', { sessionId: sid }],
      ['POST', '/context', { sessionId: sid, items: [] }],
      ['POST', '/context', { sessionId: sid, items: 'notice' }],
      ['POST', '/context', { sessionId: sid, items: [notice('x')], key: '' }],
      ['POST', '/context', { sessionId: sid, items: [notice('x')], extra: true }],
      ['POST', '/context', { sessionId: sid, items: [{ kind: 'tools' }] }],
      ['POST', '/context', { sessionId: sid, items: [{ kind: 'notice', content: 'x', source: 'nobody' }] }],
      ['POST', `/sessions/${sid}/steps`, { mode: 'bogus' }],
      ['POST', `/sessions/${sid}/steps`, { requestId: '' }],
      ['POST', `/sessions/${sid}/messages`, { role: 'system', content: 'x' }],
      ['POST', `/sessions/${sid}/messages`, { role: 'user' }],
      ['POST', `/sessions/${sid}/tool-calls`, { callId: 'c9' }],
      ['POST', `/sessions/${sid}/tool-calls/c1/context`, { items: [] }],
      ['POST', `/sessions/${sid}/tool-calls/c1/context`, { origin: 'stranger', items: [notice('x')] }],
      ['POST', `/sessions/${sid}/tool-calls/c1/approval`, {}],
      ['POST', `/sessions/${sid}/tool-calls/c1/answer`, { content: 7 }],
      ['POST', `/sessions/${sid}/rewind`, { toStepId: s.stepId, beforeStepId: s.stepId }],
      ['POST', `/sessions/${sid}/rewind`, {}],
      ['POST', `/sessions/${sid}/branches`, { atStepId: '' }],
      ['POST', `/sessions/${sid}/runs/restart`, { requestId: 3 }],
      ['PATCH', `/sessions/${sid}`, {}],
      ['PATCH', `/sessions/${sid}`, { context: [{ id: 'a' }] }],
      ['PATCH', `/agents/${s.agentId}`, {}],
      ['POST', `/agents/${s.agentId}/memories`, { content: '' }],
    ];
    for (const [method, url, body] of cases) await refused(s, method, url, body, 400, 'validation_error');
    const agentBefore = (await s.call('GET', `/agents/${s.agentId}`)).body;
    expectError(await s.call('POST', '/agents', { tools: [{ name: 'a' }, { name: 'a' }] }), 400, 'validation_error');
    expectError(await s.call('POST', '/agents', { tools: [{ name: 'bad name' }] }), 400, 'validation_error');
    expectError(await s.call('POST', '/agents', { stepContext: { maxBytes: 10 } }), 400, 'validation_error');
    expectError(await s.call('POST', '/sessions', { agentId: s.agentId, extra: 1 }), 400, 'validation_error');
    expect((await s.call('GET', `/agents/${s.agentId}`)).body).toEqual(agentBefore);
    expect((await s.call('GET', '/sessions')).body.sessions).toHaveLength(1);
  });

  it('R14: a body that is not JSON is 400 and writes nothing', async () => {
    const s = await busySession();
    const before = await state(s, s.sessionId);
    const response = await s.app.inject({
      method: 'POST',
      url: '/context',
      headers: { 'content-type': 'application/json' },
      payload: `{"sessionId":"${s.sessionId}","items":[`,
    });
    expect(response.statusCode).toBe(400);
    expect(response.json().error).toMatchObject({ code: 'validation_error', retryable: false });
    expect(await state(s, s.sessionId)).toEqual(before);
  });

  it('R14: an unknown session is 404 state_session_not_found on every session route', async () => {
    const s = await busySession();
    const before = await state(s, s.sessionId);
    const missing = 'ses_does_not_exist';
    const cases: [string, string, unknown?][] = [
      ['POST', '/context', { sessionId: missing, items: [notice('x')] }],
      ['GET', `/sessions/${missing}`],
      ['GET', `/sessions/${missing}/inspect`],
      ['GET', `/sessions/${missing}/messages`],
      ['GET', `/sessions/${missing}/stream?follow=false`],
      ['PATCH', `/sessions/${missing}`, { forceRefresh: true }],
      ['POST', `/sessions/${missing}/steps`, {}],
      ['POST', `/sessions/${missing}/messages`, { role: 'user', content: 'x' }],
      ['POST', `/sessions/${missing}/tool-calls`, { callId: 'c1', name: 'search' }],
      ['POST', `/sessions/${missing}/tool-calls/c1/context`, { items: [notice('x')] }],
      ['POST', `/sessions/${missing}/tool-calls/c1/approval`, { approved: true }],
      ['POST', `/sessions/${missing}/tool-calls/c1/answer`, { content: 'x' }],
      ['POST', `/sessions/${missing}/rewind`, { toStepId: s.stepId }],
      ['POST', `/sessions/${missing}/branches`, {}],
      ['POST', `/sessions/${missing}/runs/restart`, {}],
    ];
    for (const [method, url, body] of cases) {
      expectError(await s.call(method, url, body), 404, 'state_session_not_found');
    }
    expect(await state(s, s.sessionId)).toEqual(before);
    expect((await s.call('GET', '/sessions')).body.sessions).toHaveLength(1);
  });

  it('R14: an unknown agent is 404 state_agent_not_found and creates nothing', async () => {
    const s = await busySession();
    expectError(await s.call('POST', '/sessions', { agentId: 'agt_nope' }), 404, 'state_agent_not_found');
    expectError(await s.call('GET', '/agents/agt_nope'), 404, 'state_agent_not_found');
    expectError(await s.call('PATCH', '/agents/agt_nope', { context: 'x' }), 404, 'state_agent_not_found');
    expectError(await s.call('POST', '/agents/agt_nope/memories', { content: 'x' }), 404, 'state_agent_not_found');
    expect((await s.call('GET', '/sessions')).body.sessions).toHaveLength(1);
  });

  it('R13: a key conflict is 409 state_context_key_conflict, non-retryable, and writes nothing', async () => {
    const s = await busySession();
    await refused(
      s,
      'POST',
      '/context',
      { sessionId: s.sessionId, items: [notice('other')], key: 'k1' },
      409,
      'state_context_key_conflict',
    );
  });

  it('R21: an approval or client answer for an unknown call is 404 state_call_not_found and writes nothing', async () => {
    const s = await busySession();
    await refused(
      s,
      'POST',
      `/sessions/${s.sessionId}/tool-calls/nope/approval`,
      { approved: true },
      404,
      'state_call_not_found',
    );
    await refused(
      s,
      'POST',
      `/sessions/${s.sessionId}/tool-calls/nope/answer`,
      { content: 'x' },
      404,
      'state_call_not_found',
    );
  });

  it('R28: a rewind or branch to an unknown step is 404 state_step_not_found and writes nothing', async () => {
    const s = await busySession();
    await refused(s, 'POST', `/sessions/${s.sessionId}/rewind`, { toStepId: 'stp_nope' }, 404, 'state_step_not_found');
    await refused(
      s,
      'POST',
      `/sessions/${s.sessionId}/rewind`,
      { beforeStepId: 'stp_nope' },
      404,
      'state_step_not_found',
    );
    await refused(
      s,
      'POST',
      `/sessions/${s.sessionId}/branches`,
      { atStepId: 'stp_nope' },
      404,
      'state_step_not_found',
    );
    expect((await s.call('GET', '/sessions')).body.sessions).toHaveLength(1);
  });

  it('R9: a request body over the server limit is 413 payload_too_large and writes nothing', async () => {
    const s = await busySession();
    const before = await state(s, s.sessionId);
    const items = Array.from({ length: 200 }, () => notice('x'.repeat(30_000)));
    const answer = await s.call('POST', '/context', { sessionId: s.sessionId, items });
    expectError(answer, 413, 'payload_too_large');
    expect(await state(s, s.sessionId)).toEqual(before);
  });
});
