/**
 * Context rows through rewinds, branches, retries and restarts: R28-R33.
 */
import { describe, expect, it } from 'vitest';
import {
  addContext,
  callContext,
  disableTools,
  expectError,
  gate,
  inspect,
  instruction,
  message,
  notice,
  openSession,
  rowsOf,
  type Session,
  state,
  step,
} from './support.ts';

const TOOLS = [{ name: 'search' }, { name: 'start_upload' }];

async function rewind(s: Session, body: Record<string, string>) {
  const answer = await s.call('POST', `/sessions/${s.sessionId}/rewind`, body);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body as { logLength: number; requeued: number; queued: number; cursor: unknown; activeTools: string[] };
}

async function branch(s: Session, sessionId: string, body: Record<string, string> = {}): Promise<string> {
  const answer = await s.call('POST', `/sessions/${sessionId}/branches`, body);
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer.body.sessionId;
}

/** A hook that hands out one scripted batch per call, then nothing. */
function batches(s: Session, list: { items: Record<string, unknown>[]; cursor: unknown }[]) {
  s.hook.script = () => list.shift();
}

function contents(rows: Record<string, unknown>[]) {
  return rows.map((r) => r.content ?? `${r.kind}:${JSON.stringify(r.disable ?? r.enable)}`);
}

describe('rewinds', () => {
  it('R28: a rewind truncates the rows after the step it keeps', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    await message(s, s.sessionId, 'user', 'Hi');
    await addContext(s, s.sessionId, [notice('A')]);
    const first = await step(s, s.sessionId);
    await message(s, s.sessionId, 'assistant', 'one');
    await addContext(s, s.sessionId, [notice('B')]);
    await step(s, s.sessionId);
    const kept = await inspect(s, s.sessionId);

    const answer = await rewind(s, { toStepId: first.stepId });
    const after = await inspect(s, s.sessionId);
    expect(answer.logLength).toBe(2);
    expect(after.log).toEqual(kept.log.slice(0, 2));
    expect(after.steps.map((x) => x.stepId)).toEqual([first.stepId]);

    const before = await rewind(s, { beforeStepId: first.stepId });
    expect(before.logLength).toBe(1);
    expect((await inspect(s, s.sessionId)).log.map((e) => e.type)).toEqual(['message']);
  });

  it('R28: a queued item whose row was truncated is delivered again, once', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    const first = await step(s, s.sessionId);
    await addContext(s, s.sessionId, [instruction('Answer in French.'), notice('B')]);
    await step(s, s.sessionId);
    await addContext(s, s.sessionId, [notice('still queued')]);

    const answer = await rewind(s, { toStepId: first.stepId });
    expect(answer.requeued).toBe(2);
    expect(answer.queued).toBe(3);
    expect((await inspect(s, s.sessionId)).queue.map((q) => q.item.content)).toEqual([
      'Answer in French.',
      'B',
      'still queued',
    ]);
    const again = await step(s, s.sessionId);
    expect(contents(again.rows)).toEqual(['Answer in French.', 'B', 'still queued']);
    const later = await step(s, s.sessionId);
    expect(later.rows).toEqual([]);
    expect(contents(rowsOf(await inspect(s, s.sessionId)))).toEqual(['Answer in French.', 'B', 'still queued']);
  });

  it('R28: the cursor reverts to the last surviving row, and the hook produces again from there', async () => {
    const s = await openSession({ agent: {} });
    batches(s, [
      { items: [notice('u1')], cursor: 1 },
      { items: [notice('u2')], cursor: 2 },
      { items: [notice('u3')], cursor: 3 },
    ]);
    const first = await step(s, s.sessionId);
    await step(s, s.sessionId);
    await step(s, s.sessionId);
    const answer = await rewind(s, { toStepId: first.stepId });
    expect(answer.cursor).toBe(1);
    expect((await inspect(s, s.sessionId)).cursor).toBe(1);
    s.hook.script = ({ cursor }) => ({ items: [notice(`after ${cursor}`)], cursor: 'r2' });
    const redo = await step(s, s.sessionId);
    expect(s.hook.calls.map((c) => c.cursor)).toEqual([undefined, 1, 2, 1]);
    expect(contents(redo.rows)).toEqual(['after 1']);
    // Rewinding before the first batch reverts to no cursor at all.
    const none = await rewind(s, { beforeStepId: first.stepId });
    expect(none.cursor).toBeNull();
  });

  it('R28: memory is recalled again after a rewind removed its row', async () => {
    const s = await openSession({ agent: { memory: { autoInject: true } } });
    await s.call('POST', `/agents/${s.agentId}/memories`, { content: 'Prefers email.' });
    await message(s, s.sessionId, 'user', 'Hi');
    const first = await step(s, s.sessionId);
    expect(first.rows.map((r) => [r.kind, r.source, r.content])).toEqual([['memory', 'memory', 'Prefers email.']]);
    expect((await step(s, s.sessionId)).rows).toEqual([]); // once per user turn
    await rewind(s, { beforeStepId: first.stepId });
    const again = await step(s, s.sessionId);
    expect(again.rows.map((r) => [r.kind, r.source, r.content])).toEqual([['memory', 'memory', 'Prefers email.']]);
    expect(rowsOf(await inspect(s, s.sessionId)).filter((r) => r.kind === 'memory')).toHaveLength(1);
  });

  it('R28: the active tools are refolded from what is left', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    const first = await step(s, s.sessionId);
    await addContext(s, s.sessionId, [disableTools(['search'])]);
    await step(s, s.sessionId);
    expect(await gate(s, s.sessionId, 'c1', 'search')).toEqual({ execute: false, reason: 'tool_inactive' });
    const answer = await rewind(s, { toStepId: first.stepId });
    expect(answer.activeTools).toEqual(['search', 'start_upload', '__finish__']);
    expect(await gate(s, s.sessionId, 'c2', 'search')).toEqual({ execute: true });
  });

  it('R28: a rewind to an unknown step is 404 state_step_not_found and changes nothing', async () => {
    const s = await openSession({ agent: {} });
    await addContext(s, s.sessionId, [notice('A')]);
    await step(s, s.sessionId);
    await addContext(s, s.sessionId, [notice('queued')]);
    const before = await state(s, s.sessionId);
    expectError(
      await s.call('POST', `/sessions/${s.sessionId}/rewind`, { toStepId: 'stp_nope' }),
      404,
      'state_step_not_found',
    );
    expectError(await s.call('POST', `/sessions/${s.sessionId}/rewind`, {}), 400, 'validation_error');
    expect(await state(s, s.sessionId)).toEqual(before);
  });

  it('R29: a switch-off a tool queued goes with its call: a rewind that removes the call removes the queued item', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    await step(s, s.sessionId);
    const second = await step(s, s.sessionId);
    // A call made in answer to model call 2.
    await message(s, s.sessionId, 'assistant', '', { toolCalls: [{ callId: 'up-1', name: 'start_upload' }] });
    expect(await gate(s, s.sessionId, 'up-1', 'start_upload')).toEqual({ execute: true });
    await callContext(s, s.sessionId, 'up-1', [disableTools(['search']), instruction('Do not edit a.txt.')]);
    await addContext(s, s.sessionId, [notice('app item stays')]);

    const answer = await rewind(s, { toStepId: second.stepId });
    expect(answer.requeued).toBe(0);
    const view = await inspect(s, s.sessionId);
    expect(view.calls).toEqual([]);
    expect(view.queue.map((q) => q.item.content)).toEqual(['app item stays']);
    const next = await step(s, s.sessionId);
    expect(contents(next.rows)).toEqual(['app item stays']);
    expect(next.request.activeTools).toEqual(['search', 'start_upload', '__finish__']);
  });

  it('R29: a rewind that removes the call removes its delivered item, which is not delivered again', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    await step(s, s.sessionId);
    const second = await step(s, s.sessionId);
    await gate(s, s.sessionId, 'up-1', 'start_upload');
    await callContext(s, s.sessionId, 'up-1', [disableTools(['search']), instruction('Do not edit a.txt.')]);
    await addContext(s, s.sessionId, [notice('app item')]);
    const third = await step(s, s.sessionId);
    expect(contents(third.rows)).toEqual(['tools:["search"]', 'Do not edit a.txt.', 'app item']);

    const answer = await rewind(s, { toStepId: second.stepId });
    expect(answer.requeued).toBe(1); // the app item only
    expect(answer.activeTools).toEqual(['search', 'start_upload', '__finish__']);
    const next = await step(s, s.sessionId);
    expect(contents(next.rows)).toEqual(['app item']);
    expect(next.request.activeTools).toEqual(['search', 'start_upload', '__finish__']);
    expect(rowsOf(await inspect(s, s.sessionId)).filter((r) => r.source === 'tool')).toEqual([]);
    // The removed call's site is gone with it: the re-made call records its items again.
    await gate(s, s.sessionId, 'up-1', 'start_upload');
    expect(await callContext(s, s.sessionId, 'up-1', [instruction('Do not edit a.txt.')])).toBe(1);
  });

  it('R29: a rewind that keeps the call delivers its item again, once', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    await step(s, s.sessionId);
    // A call made in answer to model call 1, its items delivered at step 2.
    await gate(s, s.sessionId, 'up-1', 'start_upload');
    await callContext(s, s.sessionId, 'up-1', [disableTools(['search']), instruction('Do not edit a.txt.')]);
    const second = await step(s, s.sessionId);
    expect(contents(second.rows)).toEqual(['tools:["search"]', 'Do not edit a.txt.']);

    const answer = await rewind(s, { beforeStepId: second.stepId });
    expect(answer.requeued).toBe(2);
    expect((await inspect(s, s.sessionId)).calls.map((c) => c.callId)).toEqual(['up-1']);
    const again = await step(s, s.sessionId);
    expect(contents(again.rows)).toEqual(['tools:["search"]', 'Do not edit a.txt.']);
    expect(again.rows.every((r) => r.source === 'tool')).toBe(true);
    expect(again.request.activeTools).toEqual(['start_upload', '__finish__']);
    expect((await step(s, s.sessionId)).rows).toEqual([]);
  });

  it('R29: a rewind to a later step keeps the call and its rows, delivered nothing twice', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    await step(s, s.sessionId);
    await gate(s, s.sessionId, 'up-1', 'start_upload');
    await callContext(s, s.sessionId, 'up-1', [instruction('Do not edit a.txt.')]);
    const second = await step(s, s.sessionId);
    await step(s, s.sessionId);
    const answer = await rewind(s, { toStepId: second.stepId });
    expect(answer.requeued).toBe(0);
    expect(contents(rowsOf(await inspect(s, s.sessionId)))).toEqual(['Do not edit a.txt.']);
    expect((await step(s, s.sessionId)).rows).toEqual([]);
  });
});

describe('retries and restarts', () => {
  it('R30: a retry after a step committed keeps the rows of the step it re-runs', async () => {
    const s = await openSession({ agent: {} });
    await message(s, s.sessionId, 'user', 'Hi');
    await addContext(s, s.sessionId, [notice('A')]);
    batches(s, [{ items: [notice('u1')], cursor: 1 }]);
    const first = await step(s, s.sessionId);
    const retry = await step(s, s.sessionId, { mode: 'retry' });
    expect(retry.mode).toBe('retry');
    expect(retry.rows).toEqual([]);
    expect(retry.request.messages).toEqual(first.request.messages);
    expect(s.hook.calls.map((c) => c.cursor)).toEqual([undefined, 1]);
    expect(rowsOf(await inspect(s, s.sessionId))).toEqual(first.rows);
  });

  it('R31: a run that failed on its first step restarts from its start: its rows are re-made once each', async () => {
    const s = await openSession({ agent: {} });
    batches(s, [{ items: [notice('earlier run')], cursor: 0 }]);
    await message(s, s.sessionId, 'user', 'first run');
    await step(s, s.sessionId);
    await message(s, s.sessionId, 'user', 'second run');
    await addContext(s, s.sessionId, [notice('A'), instruction('B')]);
    batches(s, [{ items: [notice('u1')], cursor: 1 }]);
    const failed = await step(s, s.sessionId);
    expect(contents(failed.rows)).toEqual(['A', 'B', 'u1']);

    batches(s, [{ items: [notice('u1 again')], cursor: 1 }]);
    const restart = await s.call('POST', `/sessions/${s.sessionId}/runs/restart`, {});
    expect(restart.status).toBe(200);
    expect(contents(restart.body.rows)).toEqual(['A', 'B', 'u1 again']);
    expect(s.hook.calls.map((c) => c.cursor)).toEqual([undefined, 0, 0]);
    batches(s, [{ items: [notice('u1 third')], cursor: 1 }]);
    const again = await s.call('POST', `/sessions/${s.sessionId}/runs/restart`, {});
    expect(contents(again.body.rows)).toEqual(['A', 'B', 'u1 third']);
    expect(s.hook.calls.map((c) => c.cursor)).toEqual([undefined, 0, 0, 0]);

    const view = await inspect(s, s.sessionId);
    expect(contents(rowsOf(view))).toEqual(['earlier run', 'A', 'B', 'u1 third']);
    expect(view.queue).toEqual([]);
    expect(view.steps).toHaveLength(2);
  });

  it('R33: a restart redelivered with the same requestId answers its committed step again: rows kept, nothing re-made', async () => {
    const s = await openSession({ agent: {} });
    await message(s, s.sessionId, 'user', 'go');
    await addContext(s, s.sessionId, [notice('A')]);
    batches(s, [{ items: [notice('u1')], cursor: 1 }]);
    await step(s, s.sessionId);
    batches(s, [{ items: [notice('u1 again')], cursor: 1 }]);
    const restart = await s.call('POST', `/sessions/${s.sessionId}/runs/restart`, { requestId: 'restart-1' });
    expect(restart.status).toBe(200);
    const committed = await inspect(s, s.sessionId);
    // The model call after the restart's commit was lost; the restart request is redelivered.
    batches(s, [{ items: [notice('u1 third')], cursor: 1 }]);
    const redelivered = await s.call('POST', `/sessions/${s.sessionId}/runs/restart`, { requestId: 'restart-1' });
    expect(redelivered.status).toBe(200);
    expect({
      stepId: redelivered.body.stepId,
      rows: contents(redelivered.body.rows),
      hookCalls: s.hook.calls.length,
    }).toEqual({
      stepId: restart.body.stepId,
      rows: ['A', 'u1 again'],
      hookCalls: 2,
    });
    const after = await inspect(s, s.sessionId);
    expect({ log: after.log, steps: after.steps.map((x) => x.stepId) }).toEqual({
      log: committed.log,
      steps: committed.steps.map((x) => x.stepId),
    });
  });

  it('R33: a step lost after its rows were committed keeps them; the recovering step starts from their cursor', async () => {
    const s = await openSession({ agent: {} });
    await message(s, s.sessionId, 'user', 'Hi');
    await addContext(s, s.sessionId, [notice('A')]);
    batches(s, [{ items: [notice('u1')], cursor: 1 }]);
    const committed = await step(s, s.sessionId, { requestId: 'req-1' });
    // The model call crashed; the step request is redelivered: same answer, nothing committed again.
    const redelivered = await step(s, s.sessionId, { requestId: 'req-1' });
    expect(redelivered).toEqual({ ...committed, skipped: [] });
    expect(s.hook.calls).toHaveLength(1);
    expect(contents(rowsOf(await inspect(s, s.sessionId)))).toEqual(['A', 'u1']);
    // The recovering step keeps them and asks the hook from their cursor.
    const recovering = await step(s, s.sessionId, { mode: 'retry', requestId: 'req-2' });
    expect(recovering.rows).toEqual([]);
    expect(recovering.request.messages).toEqual(committed.request.messages);
    expect(s.hook.calls.map((c) => c.cursor)).toEqual([undefined, 1]);
    expect((await inspect(s, s.sessionId)).steps).toHaveLength(2);
  });
});

describe('branches', () => {
  it('R32: a branch copies rows with their cursor and tool effects, never the queue', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    await message(s, s.sessionId, 'user', 'Hi');
    await addContext(s, s.sessionId, [disableTools(['search']), notice('A')]);
    batches(s, [{ items: [notice('u1')], cursor: 'c1' }]);
    await step(s, s.sessionId);
    await addContext(s, s.sessionId, [notice('queued in source')]);

    const copy = await branch(s, s.sessionId);
    const source = await inspect(s, s.sessionId);
    const branched = await inspect(s, copy);
    expect(branched.log).toEqual(source.log);
    expect(branched.cursor).toBe('c1');
    expect(branched.activeTools).toEqual(['start_upload', '__finish__']);
    expect(branched.queue).toEqual([]);
    expect(source.queue.map((q) => q.item.content)).toEqual(['queued in source']);

    const inBranch = await step(s, copy);
    expect(inBranch.rows).toEqual([]);
    expect(inBranch.request.activeTools).toEqual(['start_upload', '__finish__']);
    expect(s.hook.calls.at(-1)).toEqual({ sessionId: copy, cursor: 'c1' });
    const inSource = await step(s, s.sessionId);
    expect(contents(inSource.rows)).toEqual(['queued in source']);
    expect(s.hook.calls.at(-1)).toEqual({ sessionId: s.sessionId, cursor: 'c1' });
  });

  it("R32: a branch at a step copies the rows up to it with that step's cursor", async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    batches(s, [
      { items: [notice('u1')], cursor: 1 },
      { items: [notice('u2'), disableTools(['search'])], cursor: 2 },
    ]);
    const first = await step(s, s.sessionId);
    await step(s, s.sessionId);
    const copy = await branch(s, s.sessionId, { atStepId: first.stepId });
    const view = await inspect(s, copy);
    expect(contents(rowsOf(view))).toEqual(['u1']);
    expect(view.cursor).toBe(1);
    expect(view.activeTools).toEqual(['search', 'start_upload', '__finish__']);
    s.hook.script = ({ cursor }) => ({ items: [notice(`branch after ${cursor}`)], cursor: 'b2' });
    expect(contents((await step(s, copy)).rows)).toEqual(['branch after 1']);
    // The source is untouched by the branch's step.
    expect(contents(rowsOf(await inspect(s, s.sessionId)))).toEqual(['u1', 'u2', 'tools:["search"]']);
  });

  it('R32: a branch at an unknown step is 404 state_step_not_found and creates nothing', async () => {
    const s = await openSession({ agent: {} });
    await step(s, s.sessionId);
    const sessions = (await s.call('GET', '/sessions')).body.sessions.length;
    expectError(
      await s.call('POST', `/sessions/${s.sessionId}/branches`, { atStepId: 'stp_nope' }),
      404,
      'state_step_not_found',
    );
    expect((await s.call('GET', '/sessions')).body.sessions).toHaveLength(sessions);
  });
});
