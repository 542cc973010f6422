/**
 * Switching tools off and on: R16-R21 (active set from the next call on, the
 * tool gate, folding from the log, who may enable, `__finish__`, approvals).
 */
import { describe, expect, it } from 'vitest';
import {
  addContext,
  callContext,
  disableTools,
  enableTools,
  expectError,
  gate,
  inspect,
  message,
  notice,
  openSession,
  state,
  step,
} from './support.ts';

const TOOLS = [{ name: 'search', description: 'Searches the web' }, { name: 'lookup' }];
const OFFERED = [
  { name: 'search', description: 'Searches the web' },
  { name: 'lookup' },
  {
    name: '__finish__',
    description: 'Call when the task is complete.',
    parameters: {
      type: 'object',
      properties: { result: { type: 'string', description: 'The final answer, or a summary of what was done.' } },
      additionalProperties: false,
    },
  },
];

describe('tool switches', () => {
  it('R16: a tools item changes the active tools from the next model call on; the offered tool list does not change', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    const before = await step(s, s.sessionId);
    expect(before.request.activeTools).toEqual(['search', 'lookup', '__finish__']);
    await addContext(s, s.sessionId, [disableTools(['search'])]);
    const off = await step(s, s.sessionId);
    expect(off.request.activeTools).toEqual(['lookup', '__finish__']);
    expect(off.request.tools).toEqual(OFFERED);
    expect(before.request.tools).toEqual(OFFERED);
    expect(await gate(s, s.sessionId, 'c1', 'search')).toEqual({ execute: false, reason: 'tool_inactive' });
    await addContext(s, s.sessionId, [enableTools(['search'])]);
    const on = await step(s, s.sessionId);
    expect(on.request.activeTools).toEqual(['search', 'lookup', '__finish__']);
    expect(on.request.tools).toEqual(OFFERED);
    expect((await gate(s, s.sessionId, 'c2', 'search')).execute).toBe(true);
  });

  it('R17: a call to a switched-off tool is not executed: tool_inactive; an undeclared one: tool_unavailable', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    await addContext(s, s.sessionId, [disableTools(['search'])]);
    await step(s, s.sessionId);
    expect(await gate(s, s.sessionId, 'c1', 'search')).toEqual({ execute: false, reason: 'tool_inactive' });
    expect(await gate(s, s.sessionId, 'c2', 'delete_everything')).toEqual({
      execute: false,
      reason: 'tool_unavailable',
    });
    expect(await gate(s, s.sessionId, 'c3', 'lookup')).toEqual({ execute: true });
    // The same call asked again gets the same decision.
    expect(await gate(s, s.sessionId, 'c1', 'search')).toEqual({ execute: false, reason: 'tool_inactive' });
    const calls = (await inspect(s, s.sessionId)).calls;
    expect(calls.map((c) => [c.callId, c.status, c.reason])).toEqual([
      ['c1', 'refused', 'tool_inactive'],
      ['c2', 'refused', 'tool_unavailable'],
      ['c3', 'executed', undefined],
    ]);
  });

  it('R17: a switched-off tool that needs an approval or runs on the client gets no approval request and no client ask', async () => {
    const s = await openSession({
      agent: {
        tools: [
          { name: 'refund', needsApproval: true },
          { name: 'ask_user', client: true, deadlineMs: 1000 },
        ],
      },
    });
    await addContext(s, s.sessionId, [disableTools(['refund', 'ask_user'])]);
    await step(s, s.sessionId);
    expect(await gate(s, s.sessionId, 'c1', 'refund')).toEqual({ execute: false, reason: 'tool_inactive' });
    expect(await gate(s, s.sessionId, 'c2', 'ask_user')).toEqual({ execute: false, reason: 'tool_inactive' });
    // Nothing waits: an approval leaves the refusal as it is, a client answer finds no ask.
    const approval = await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c1/approval`, { approved: true });
    expect(approval).toEqual({ status: 200, body: { execute: false, reason: 'tool_inactive' } });
    const before = await state(s, s.sessionId);
    expectError(
      await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c2/answer`, { content: 'yes' }),
      404,
      'state_call_not_found',
    );
    expect(await state(s, s.sessionId)).toEqual(before);
    expect((await inspect(s, s.sessionId)).calls.every((c) => c.status === 'refused')).toBe(true);
  });

  it('R17: a refused call queues no context: its tool body never ran', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    expect(await gate(s, s.sessionId, 'c1', 'nope')).toEqual({ execute: false, reason: 'tool_unavailable' });
    expect((await step(s, s.sessionId)).rows).toEqual([]);
  });

  it('R18: the active set is folded from the log: a rewind past the switch-off restores the tool', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    const first = await step(s, s.sessionId);
    await addContext(s, s.sessionId, [disableTools(['search'])]);
    const second = await step(s, s.sessionId);
    expect(second.request.activeTools).toEqual(['lookup', '__finish__']);
    const rewound = await s.call('POST', `/sessions/${s.sessionId}/rewind`, { toStepId: first.stepId });
    expect(rewound.status).toBe(200);
    expect(rewound.body.activeTools).toEqual(['search', 'lookup', '__finish__']);
    const snapshot = await s.call('GET', `/sessions/${s.sessionId}`);
    expect(snapshot.body.activeTools).toEqual(['search', 'lookup', '__finish__']);
  });

  it('R18: a branch folds its active set from the rows it copied', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    const first = await step(s, s.sessionId);
    await addContext(s, s.sessionId, [disableTools(['search'])]);
    const second = await step(s, s.sessionId);
    const atFirst = await s.call('POST', `/sessions/${s.sessionId}/branches`, { atStepId: first.stepId });
    const atSecond = await s.call('POST', `/sessions/${s.sessionId}/branches`, { atStepId: second.stepId });
    expect(atFirst.status).toBe(201);
    expect(atSecond.status).toBe(201);
    expect((await step(s, atFirst.body.sessionId)).request.activeTools).toEqual(['search', 'lookup', '__finish__']);
    expect((await step(s, atSecond.body.sessionId)).request.activeTools).toEqual(['lookup', '__finish__']);
    expect(await gate(s, atFirst.body.sessionId, 'b1', 'search')).toEqual({ execute: true });
    expect(await gate(s, atSecond.body.sessionId, 'b2', 'search')).toEqual({ execute: false, reason: 'tool_inactive' });
  });

  it('R19: a tool may switch a tool off, never on: its enable is a 400 and nothing is queued', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    await gate(s, s.sessionId, 'c1', 'lookup');
    expect(await callContext(s, s.sessionId, 'c1', [disableTools(['search'])])).toBe(1);
    await step(s, s.sessionId);
    await gate(s, s.sessionId, 'c2', 'lookup');
    const before = await state(s, s.sessionId);
    const refused = await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c2/context`, {
      items: [enableTools(['search'])],
    });
    expectError(refused, 400, 'validation_error');
    expect(await state(s, s.sessionId)).toEqual(before);
    // An app row claiming source tool cannot switch on either: only app and hook rows enable.
    await addContext(s, s.sessionId, [{ kind: 'tools', enable: ['search'], source: 'tool' }]);
    expect((await step(s, s.sessionId)).request.activeTools).toEqual(['lookup', '__finish__']);
  });

  it('R19: app rows and stepContext hook rows enable a tool switched off by a tool', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    await gate(s, s.sessionId, 'c1', 'lookup');
    await callContext(s, s.sessionId, 'c1', [disableTools(['search', 'lookup'])]);
    expect((await step(s, s.sessionId)).request.activeTools).toEqual(['__finish__']);
    await addContext(s, s.sessionId, [enableTools(['search'])]);
    const byApp = await step(s, s.sessionId);
    expect(byApp.request.activeTools).toEqual(['search', '__finish__']);
    s.hook.script = () => ({ items: [{ kind: 'tools', enable: ['lookup'] }], cursor: 1 });
    const byHook = await step(s, s.sessionId);
    expect(byHook.rows.map((r) => [r.kind, r.source, r.enable])).toEqual([['tools', 'hook', ['lookup']]]);
    expect(byHook.request.activeTools).toEqual(['search', 'lookup', '__finish__']);
  });

  it("R19: an agent hook's ctx.addContext (source app) may enable a tool", async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    await addContext(s, s.sessionId, [disableTools(['search'])]);
    await step(s, s.sessionId);
    await gate(s, s.sessionId, 'c1', 'lookup');
    expect(await callContext(s, s.sessionId, 'c1', [enableTools(['search'])], { origin: 'hook' })).toBe(1);
    expect((await step(s, s.sessionId)).request.activeTools).toEqual(['search', 'lookup', '__finish__']);
  });

  it('R20: __finish__ is always declared and can never be switched off (app, tool, hook: refused, nothing queued)', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'search' }] } });
    const before = await state(s, s.sessionId);
    expectError(
      await s.call('POST', '/context', { sessionId: s.sessionId, items: [disableTools(['__finish__'])] }),
      400,
      'validation_error',
    );
    await gate(s, s.sessionId, 'c1', 'search');
    const afterGate = await state(s, s.sessionId);
    expectError(
      await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c1/context`, {
        items: [disableTools(['search', '__finish__'])],
      }),
      400,
      'validation_error',
    );
    expectError(
      await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c1/context`, {
        origin: 'hook',
        items: [disableTools(['__finish__'])],
      }),
      400,
      'validation_error',
    );
    expect((await state(s, s.sessionId)).queue).toEqual(before.queue);
    expect(await state(s, s.sessionId)).toEqual(afterGate);
    // A stepContext hook trying it is an invalid result: skipped, no row.
    s.hook.script = () => ({ items: [disableTools(['__finish__'])], cursor: 1 });
    const answer = await step(s, s.sessionId);
    expect(answer.rows).toEqual([]);
    expect(answer.skipped.map((k) => k.reason)).toEqual(['hook_invalid']);
    expect(answer.request.activeTools).toEqual(['search', '__finish__']);
    expect(answer.request.tools.map((t) => t.name)).toEqual(['search', '__finish__']);
  });

  it('R20: in forced completion the completion tool is always callable, even when every other tool is off', async () => {
    const s = await openSession({
      agent: { tools: [{ name: 'search' }, { name: '__finish__', needsApproval: true }] },
    });
    await addContext(s, s.sessionId, [disableTools(['search'])]);
    const forced = await step(s, s.sessionId, { mode: 'forced_completion' });
    expect(forced.mode).toBe('forced_completion');
    expect(forced.request.activeTools).toEqual(['__finish__']);
    expect(await gate(s, s.sessionId, 'fin', '__finish__')).toEqual({ execute: true });
  });

  it('R21: a switch-off still queued reaches a waiting approval: approving gives tool_inactive', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'refund', needsApproval: true }, { name: 'search' }] } });
    await step(s, s.sessionId);
    expect(await gate(s, s.sessionId, 'c1', 'refund')).toEqual({ execute: false, reason: 'approval_required' });
    await addContext(s, s.sessionId, [disableTools(['refund'])]);
    expect((await inspect(s, s.sessionId)).queue).toHaveLength(1); // not yet a row
    const approval = await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c1/approval`, { approved: true });
    expect(approval).toEqual({ status: 200, body: { execute: false, reason: 'tool_inactive' } });
    expect(await gate(s, s.sessionId, 'c1', 'refund')).toEqual({ execute: false, reason: 'tool_inactive' });
  });

  it('R21: a switch-off queued by a tool in the same step reaches the waiting approval', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'refund', needsApproval: true }, { name: 'search' }] } });
    await step(s, s.sessionId);
    await message(s, s.sessionId, 'assistant', '', {
      toolCalls: [
        { callId: 'c1', name: 'refund' },
        { callId: 'c2', name: 'search' },
      ],
    });
    expect(await gate(s, s.sessionId, 'c1', 'refund')).toEqual({ execute: false, reason: 'approval_required' });
    expect(await gate(s, s.sessionId, 'c2', 'search')).toEqual({ execute: true });
    await callContext(s, s.sessionId, 'c2', [disableTools(['refund'])]);
    const approval = await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c1/approval`, { approved: true });
    expect(approval.body).toEqual({ execute: false, reason: 'tool_inactive' });
  });

  it('R21: a switch-off row in the log refuses an approval; without a switch-off the approval runs the call', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'refund', needsApproval: true }] } });
    await step(s, s.sessionId);
    expect(await gate(s, s.sessionId, 'c1', 'refund')).toEqual({ execute: false, reason: 'approval_required' });
    expect(await gate(s, s.sessionId, 'c2', 'refund')).toEqual({ execute: false, reason: 'approval_required' });
    const approved = await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c2/approval`, { approved: true });
    expect(approved.body).toEqual({ execute: true });
    s.hook.script = () => ({ items: [disableTools(['refund']), notice('refunds paused')], cursor: 'h1' });
    await step(s, s.sessionId);
    const approval = await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c1/approval`, { approved: true });
    expect(approval.body).toEqual({ execute: false, reason: 'tool_inactive' });
  });
});
