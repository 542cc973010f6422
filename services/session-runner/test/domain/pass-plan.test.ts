/**
 * The context pass's planning (domain/pass-plan.ts): from the session as read, the agent, the
 * hook's answer and the recalled memory to the rows, the step record and the meta, without I/O.
 * The input is deep-frozen: planning changes nothing it is given.
 */
import { CtxflowError } from '@ctxflow/contracts';
import { describe, expect, it } from 'vitest';
import { LogView } from '../../src/domain/log-view.ts';
import type { AgentRecord, SessionMeta, SessionState } from '../../src/domain/model.ts';
import { closingResults, type PassInput, planPass } from '../../src/domain/pass-plan.ts';

const NOW = Date.parse('2026-03-01T10:00:00.000Z');
const AT = new Date(NOW).toISOString();

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}

const agent: AgentRecord = {
  agentId: 'agt_1',
  tenant: 'acme',
  context: [{ content: 'You answer tickets.' }],
  model: 'model-a',
  tools: [{ name: 'search' }, { name: '__finish__' }],
  stepContext: { maxBytes: 32_768, timeoutMs: 5_000 },
  memory: { autoInject: true },
  cacheTtlMs: 300_000,
  createdAt: AT,
  version: 1,
};

function session(meta: Partial<SessionMeta> = {}, state: Partial<SessionState> = {}): SessionState {
  return deepFreeze({
    meta: {
      sessionId: 'ses_1',
      tenant: 'acme',
      agentId: 'agt_1',
      createdAt: AT,
      thread: { live: [{ content: 'Be brief.' }] },
      forceRefresh: false,
      steps: 0,
      ...meta,
    },
    log: [],
    queue: [],
    calls: [],
    sites: [],
    itemSeq: 0,
    requestIds: [],
    version: '1',
    ...state,
  });
}

function input(state: SessionState, overrides: Partial<PassInput> = {}): PassInput {
  return {
    state,
    agent,
    mode: 'first',
    requestId: 'req_1',
    stepId: 'stp_1',
    runId: 'run_1',
    now: NOW,
    at: AT,
    closed: [],
    baseView: LogView.of(state.log),
    hook: undefined,
    memories: undefined,
    ...overrides,
  };
}

describe('planPass', () => {
  it('a first step: the queue, the hook batch and the memory become rows in that order, in a new run', () => {
    const state = session(
      {},
      {
        queue: [
          { itemId: 'itm_1', item: { kind: 'notice', source: 'app', content: 'first' }, at: AT },
          { itemId: 'itm_2', item: { kind: 'tools', source: 'app', disable: ['search'] }, at: AT },
        ],
        itemSeq: 2,
      },
    );
    const plan = planPass(
      input(state, {
        hook: {
          type: 'batch',
          items: [{ kind: 'notice', source: 'hook', content: 'from the feed' }],
          cursor: 7,
          leftOut: 0,
        },
        memories: ['likes tea', 'lives in Oslo'],
      }),
    );
    expect(plan.rows.map((r) => [r.seq, r.row])).toEqual([
      [0, { id: 'stp_1.0', role: 'context', kind: 'notice', source: 'app', content: 'first' }],
      [1, { id: 'stp_1.1', role: 'context', kind: 'tools', source: 'app', disable: ['search'] }],
      [2, { id: 'stp_1.2', role: 'context', kind: 'notice', source: 'hook', content: 'from the feed', cursor: 7 }],
      [3, { id: 'stp_1.3', role: 'context', kind: 'memory', source: 'memory', content: 'likes tea\nlives in Oslo' }],
    ]);
    expect(plan.rows.map((r) => r.itemId)).toEqual(['itm_1', 'itm_2', undefined, undefined]);
    expect(plan.step).toEqual({
      stepId: 'stp_1',
      requestId: 'req_1',
      ordinal: 1,
      mode: 'first',
      runId: 'run_1',
      logStart: 0,
      logEnd: 4,
      rowIds: ['stp_1.0', 'stp_1.1', 'stp_1.2', 'stp_1.3'],
      system: 'You answer tickets.\n\nBe brief.',
      activeTools: ['__finish__'],
      cursor: 7,
      cache: { rebuilt: true, reason: 'new_thread' },
      model: 'model-a',
      at: AT,
    });
    expect(plan.meta).toEqual({
      ...state.meta,
      run: {
        runId: 'run_1',
        agentContext: agent.context,
        startLength: 0,
        startOrdinal: 0,
        open: true,
        model: 'model-a',
      },
      prefix: { system: 'You answer tickets.\n\nBe brief.', agentContext: agent.context, model: 'model-a' },
      steps: 1,
      lastStepAt: NOW,
      lastRequestEnd: 4,
    });
    expect(plan.log).toEqual(plan.rows);
    expect(plan.skipped).toEqual([]);
    expect([plan.freshRun, plan.rebuilt, plan.previousSystem, plan.previousEnd]).toEqual([
      true,
      true,
      undefined,
      undefined,
    ]);
  });

  it('a warm step inside a run changes the counters only; a skipped hook and an over-size memory are skips', () => {
    const prefix = { system: 'You answer tickets.\n\nBe brief.', agentContext: agent.context, model: 'model-a' };
    const run = {
      runId: 'run_1',
      agentContext: agent.context,
      model: 'model-a',
      startLength: 0,
      startOrdinal: 0,
      open: true,
    };
    const state = session(
      { run, prefix, steps: 1, lastStepAt: NOW - 1_000, lastRequestEnd: 1 },
      { log: [{ type: 'message', seq: 0, role: 'user', content: 'hello', at: AT }] },
    );
    const plan = planPass(
      input(state, {
        runId: undefined,
        stepId: 'stp_2',
        hook: { type: 'skipped', reason: 'hook_timeout', message: 'the hook did not answer within 5000 ms' },
        memories: ['x'.repeat(70_000)],
      }),
    );
    expect(plan.skipped).toEqual([
      { reason: 'hook_timeout', message: 'the hook did not answer within 5000 ms' },
      {
        reason: 'memory_too_large',
        message: expect.stringMatching(/^recalled memory is \d+ bytes, over the \d+-byte message limit$/),
      },
    ]);
    expect(plan.rows.map((r) => r.row)).toEqual([
      { id: 'stp_2.0', role: 'context', kind: 'memory', source: 'memory', content: '' },
    ]);
    expect(plan.step.cache).toEqual({ rebuilt: false });
    expect(plan.step.previousEnd).toBe(2);
    expect(plan.meta).toEqual({ ...state.meta, steps: 2, lastStepAt: NOW, lastRequestEnd: 2 });
    expect([plan.freshRun, plan.rebuilt, plan.previousSystem, plan.previousEnd]).toEqual([
      false,
      false,
      prefix.system,
      1,
    ]);
  });

  it('a prefix idle past the agent cache TTL is rebuilt as cache_cold, folding the staged thread context', () => {
    const prefix = { system: 'You answer tickets.\n\nBe brief.', agentContext: agent.context, model: 'model-a' };
    const run = {
      runId: 'run_1',
      agentContext: agent.context,
      model: 'model-a',
      startLength: 0,
      startOrdinal: 0,
      open: true,
    };
    const state = session({
      run,
      prefix,
      steps: 1,
      lastStepAt: NOW - agent.cacheTtlMs - 1,
      thread: { live: [{ content: 'Be brief.' }], staged: [{ content: 'Be thorough.' }] },
    });
    const plan = planPass(input(state, { runId: undefined }));
    expect(plan.step.cache).toEqual({ rebuilt: true, reason: 'cache_cold' });
    expect(plan.step.system).toBe('You answer tickets.\n\nBe thorough.');
    expect(plan.meta.thread).toEqual({ live: [{ content: 'Be thorough.' }] });
  });
});

describe('closingResults', () => {
  const assistant = {
    type: 'message' as const,
    seq: 0,
    role: 'assistant' as const,
    content: '',
    toolCalls: [
      { callId: 'c1', name: 'search' },
      { callId: 'c2', name: '__finish__' },
    ],
    at: AT,
  };

  it('records the results ctxflow knows why, after the log', () => {
    const state = session(
      {},
      {
        log: [assistant],
        calls: [{ callId: 'c1', name: 'search', stepIndex: 0, status: 'refused', reason: 'tool_inactive' }],
      },
    );
    expect(closingResults(state, NOW, AT)).toEqual([
      {
        type: 'message',
        seq: 1,
        role: 'tool',
        content: 'Not executed (tool_inactive): the tool search is switched off.',
        callId: 'c1',
        name: 'search',
        outcome: 'tool_inactive',
        at: AT,
      },
      {
        type: 'message',
        seq: 2,
        role: 'tool',
        content: 'Finished.',
        callId: 'c2',
        name: '__finish__',
        outcome: 'finished',
        at: AT,
      },
    ]);
  });

  it('refuses the step while a call waits for its result', () => {
    const state = session({}, { log: [assistant] });
    expect(() => closingResults(state, NOW, AT)).toThrow(CtxflowError);
    expect(() => closingResults(state, NOW, AT)).toThrow(
      "step: 1 call of the last assistant message has no result yet (details.pending); record their results (POST /sessions/:sessionId/messages), or wait for the client's answer, its deadline or the approval, then send it again",
    );
  });
});
