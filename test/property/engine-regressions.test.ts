/**
 * Minimal reproductions of the defects the context engine's property test
 * (context-engine.property.test.ts) found, kept as regression tests: call sites
 * survive branches and a hook's sites survive a rewind (R10, R15), and item
 * ids never collide in a branch (R28, R29).
 */
import { createEngine } from '@ctxflow/session-runner';
import { describe, expect, it } from 'vitest';
import { ManualClock, RecordingTelemetry, ScriptedHook } from '../support/harness.ts';

const T = 'default';

async function setup() {
  const hook = new ScriptedHook();
  let cursor = 0;
  hook.script = () => ({ items: [{ kind: 'notice', content: `update ${++cursor}` }], cursor });
  const engine = createEngine({ clock: new ManualClock(), telemetry: new RecordingTelemetry(), feed: hook });
  const agent = await engine.createAgent(T, { tools: [{ name: 'a' }], stepContext: { timeoutMs: 50 } });
  const { sessionId } = await engine.createSession(T, { agentId: agent.agentId });
  return { engine, hook, sessionId };
}

/** The contexts of the rows in the log and the queue, in order. */
async function contents(engine: ReturnType<typeof createEngine>, sessionId: string) {
  const view = await engine.inspect(T, sessionId);
  return {
    log: view.log.flatMap((e) => ('row' in e ? [e.row.content] : [])),
    queue: view.queue.map((q) => (q.item.kind === 'tools' ? undefined : q.item.content)),
  };
}

describe('regressions found by the property test', () => {
  it('branch-sites: R10/R15 a tool re-run for a call a branch copied records nothing (its row is already in the branch)', async () => {
    const { engine, sessionId } = await setup();
    await engine.gateToolCall(T, sessionId, { callId: 'call0', name: 'a' });
    const add = { callId: 'call0', origin: 'tool' as const, items: [{ kind: 'notice', content: 'X' }] };
    expect(await engine.addCallContext(T, sessionId, add)).toEqual({ recorded: 1 });
    await engine.step(T, sessionId); // X becomes a row
    const { sessionId: branch } = await engine.branch(T, sessionId, {});
    // The branch has the call and X's row; the tool body of call0 runs again there.
    expect(await engine.addCallContext(T, branch, add)).toEqual({ recorded: 0 });
    await engine.step(T, branch);
    expect((await contents(engine, branch)).log.filter((c) => c === 'X')).toHaveLength(1);
  });

  it('rewind-hook-sites: R10/R15 after a rewind removed call k, a hook re-run for k records nothing while its item is still queued', async () => {
    const { engine, sessionId } = await setup();
    const step1 = await engine.step(T, sessionId);
    await engine.gateToolCall(T, sessionId, { callId: 'call1', name: 'a' }); // answers model call 1
    const add = { callId: 'call1', origin: 'hook' as const, items: [{ kind: 'notice', content: 'X' }] };
    expect(await engine.addCallContext(T, sessionId, add)).toEqual({ recorded: 1 });
    // Removes call1; a hook's item does not go with the call (R29 is about a tool's items), so X stays queued.
    await engine.rewind(T, sessionId, { toStepId: step1.stepId });
    expect((await contents(engine, sessionId)).queue).toEqual(['X']);
    expect(await engine.addCallContext(T, sessionId, add)).toEqual({ recorded: 0 });
    const step = await engine.step(T, sessionId);
    expect(step.rows.filter((r) => r.content === 'X')).toHaveLength(1);
  });

  it('branch-item-ids: R28/R29 a rewind in a branch that drops a tool item of a removed call keeps every other queued item', async () => {
    const { engine, sessionId } = await setup();
    const step1 = await engine.step(T, sessionId);
    await engine.gateToolCall(T, sessionId, { callId: 'call0', name: 'a' }); // answers model call 1
    await engine.addContext(T, { sessionId, items: [{ kind: 'notice', content: 'X' }] }); // itm_1 of the source
    const step2 = await engine.step(T, sessionId); // X becomes a row, its queue record (itm_1) kept for rewinds
    const { sessionId: branch } = await engine.branch(T, sessionId, {});
    // The branch numbers its own items from itm_1 again: the tool's item collides with X's record.
    await engine.addCallContext(T, branch, {
      callId: 'call0',
      origin: 'tool',
      items: [{ kind: 'notice', content: 'from the tool' }],
    });
    await engine.rewind(T, branch, { beforeStepId: step2.stepId }); // X queued again, the call kept
    expect((await contents(engine, branch)).queue).toEqual(['X', 'from the tool']);
    await engine.rewind(T, branch, { toStepId: step1.stepId }); // removes call0 and its item, never X
    expect((await contents(engine, branch)).queue).toEqual(['X']);
    const step = await engine.step(T, branch);
    expect(step.rows.map((r) => r.content)).toContain('X');
  });
});
