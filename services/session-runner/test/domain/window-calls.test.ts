/**
 * The tool gate and message appends on a session's log window (log-window.ts): the gate folds the
 * active tools over the fold's `tools` rows and the window, and an append checks call ids against
 * the session's call records, so neither reads the whole log, and each decides as the whole log
 * does. On the in-memory store and on Redis.
 */
import { createEngine, type SessionStore } from '@ctxflow/session-runner';
import { describe, expect, it } from 'vitest';
import { engineStores } from './stores.ts';

const TENANT = 'acme';
const stores = engineStores('window-calls');

interface Load {
  window: boolean;
  logStart: number;
  entries: number;
}

/** The store with what each load read; `whole`: every load reads the whole log, whatever it asks. */
function reading(store: SessionStore, whole = false): { store: SessionStore; loads: Load[] } {
  const loads: Load[] = [];
  const proxy = new Proxy(store, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (name !== 'load') return typeof value === 'function' ? value.bind(target) : value;
      return async (sessionId: string, options?: { window?: boolean }) => {
        const state = await target.load(sessionId, whole ? {} : options);
        loads.push({
          window: options?.window === true,
          logStart: state?.logStart ?? 0,
          entries: state?.log.length ?? 0,
        });
        return state;
      };
    },
  });
  return { store: proxy, loads };
}

/** A runtime on an engine that holds nothing: every operation reads the store, steps are deltas. */
function runtimeOn(store: SessionStore) {
  const engine = createEngine({ store, heldSessions: 0 });
  let held = 0;
  let sessionId = '';
  return {
    engine,
    get sessionId() {
      return sessionId;
    },
    async open() {
      const agent = await engine.createAgent(TENANT, {
        tools: [{ name: 'search' }, { name: 'lookup' }, { name: 'refund', needsApproval: true }],
      });
      sessionId = (await engine.createSession(TENANT, { agentId: agent.agentId })).sessionId;
    },
    async step() {
      const { request } = await engine.step(TENANT, sessionId, { since: held });
      held = (request.since ?? 0) + request.messages.length;
    },
    switchTools(item: { disable?: string[]; enable?: string[] }) {
      return engine.addContext(TENANT, { sessionId, items: [{ kind: 'tools', ...item }] });
    },
    say(role: 'user' | 'assistant', content: string, toolCalls?: { callId: string; name: string }[]) {
      return engine.appendMessage(TENANT, sessionId, { role, content, ...(toolCalls ? { toolCalls } : {}) });
    },
    result(callId: string, content: string) {
      return engine.appendMessage(TENANT, sessionId, { role: 'tool', callId, content });
    },
    gate(callId: string, name: string) {
      return engine.gateToolCall(TENANT, sessionId, { callId, name });
    },
    approve(callId: string, approved: boolean) {
      return engine.answerApproval(TENANT, sessionId, callId, approved);
    },
    /** A user turn: the question, a step, the answer (the next user message moves the fold past it). */
    async turn(n: number) {
      await this.say('user', `question ${n}`);
      await this.step();
      await this.say('assistant', `answer ${n}`);
    },
  };
}

describe.each(stores)('the tool gate on the log window on the %s store', (_name, newStore) => {
  it('decides as on the whole log across tool switches before and after the fold, queued ones too', async () => {
    const decisions: unknown[][] = [];
    const windowLoads: Load[] = [];
    for (const whole of [true, false]) {
      const { store, loads } = reading(newStore(), whole);
      const rt = runtimeOn(store);
      await rt.open();
      const seen: unknown[] = [];
      const ask = async (callId: string, name: string) => seen.push([callId, await rt.gate(callId, name)]);
      await rt.turn(1);
      // Switched off, then delivered: a row before the fold once the next user message comes.
      await rt.switchTools({ disable: ['search', 'refund'] });
      await rt.turn(2);
      await rt.turn(3);
      await ask('g1', 'search');
      await ask('g2', 'lookup');
      await ask('g3', 'refund');
      // Back on (the app may), then a switch in the window, after the fold.
      await rt.switchTools({ enable: ['search', 'refund'] });
      await rt.turn(4);
      await rt.say('user', 'question 5');
      await rt.switchTools({ disable: ['lookup'] });
      await rt.step();
      await ask('g4', 'search');
      await ask('g5', 'lookup');
      await ask('g6', 'refund');
      await ask('g7', 'refund');
      // A switch-off still queued binds an approval (R21); the call asked again keeps its decision.
      await rt.switchTools({ disable: ['refund'] });
      seen.push(['g6', await rt.approve('g6', true)]);
      await rt.step();
      await rt.say('assistant', 'answer 5');
      await rt.switchTools({ enable: ['refund'] });
      await rt.turn(6);
      seen.push(['g7', await rt.approve('g7', true)]);
      await ask('g1', 'search');
      await ask('g8', 'nothing');
      decisions.push(seen);
      if (!whole) windowLoads.push(...loads);
    }
    const [onWholeLog, onWindow] = decisions;
    expect(onWindow).toEqual(onWholeLog);
    expect(onWindow).toEqual([
      ['g1', { execute: false, reason: 'tool_inactive' }],
      ['g2', { execute: true }],
      ['g3', { execute: false, reason: 'tool_inactive' }],
      ['g4', { execute: true }],
      ['g5', { execute: false, reason: 'tool_inactive' }],
      ['g6', { execute: false, reason: 'approval_required' }],
      ['g7', { execute: false, reason: 'approval_required' }],
      ['g6', { execute: false, reason: 'tool_inactive' }],
      ['g7', { execute: true }],
      ['g1', { execute: false, reason: 'tool_inactive' }],
      ['g8', { execute: false, reason: 'tool_unavailable' }],
    ]);
    // Every read of the window engine but its first step's (a whole answer) was a window, the
    // gate's past the first switches.
    expect(windowLoads.filter((l) => !l.window)).toEqual([{ window: false, logStart: 0, entries: 1 }]);
    expect(windowLoads.at(-1)!.logStart).toBeGreaterThan(0);
  });

  it('reads the log window, as much at turn 60 as at turn 5', async () => {
    const { store, loads } = reading(newStore());
    const rt = runtimeOn(store);
    await rt.open();
    const readsAt = async (turn: number) => {
      await rt.turn(turn);
      loads.length = 0;
      await rt.gate(`c${turn}`, 'refund');
      await rt.approve(`c${turn}`, true);
      await rt.gate(`c${turn}`, 'refund');
      return loads.map((l) => `${l.window ? 'window' : 'whole'}:${l.entries}`);
    };
    for (let n = 1; n < 5; n++) await rt.turn(n);
    const early = await readsAt(5);
    for (let n = 6; n < 60; n++) await rt.turn(n);
    const late = await readsAt(60);
    expect(early).toEqual(['window:1', 'window:1', 'window:1']);
    expect(late).toEqual(early);
  });
});

describe.each(stores)('message appends on the log window on the %s store', (_name, newStore) => {
  it("refuses a call id an assistant message used before the window, from the session's call records", async () => {
    const { store, loads } = reading(newStore());
    const rt = runtimeOn(store);
    await rt.open();
    await rt.say('user', 'question 1');
    await rt.step();
    await rt.say('assistant', '', [{ callId: 'old', name: 'search' }]);
    await rt.result('old', 'found');
    await rt.step();
    await rt.say('assistant', 'answer 1');
    // A call the gate decided before the runtime recorded its assistant turn (one request).
    await rt.gate('gated', 'lookup');
    await rt.engine.appendMessages(TENANT, rt.sessionId, [
      { role: 'assistant', content: '', toolCalls: [{ callId: 'gated', name: 'lookup' }] },
      { role: 'tool', callId: 'gated', content: 'looked up' },
    ]);
    await rt.step();
    await rt.say('assistant', 'answer 2');
    for (let n = 3; n <= 5; n++) await rt.turn(n);
    loads.length = 0;

    for (const callId of ['old', 'gated']) {
      await expect(rt.say('assistant', '', [{ callId, name: 'search' }])).rejects.toMatchObject({
        code: 'validation_error',
        message: 'message: toolCalls.0.callId is already used by another call',
      });
    }
    const fresh = await rt.say('assistant', '', [{ callId: 'new', name: 'search' }]);
    expect(fresh.toolCalls).toEqual([{ callId: 'new', name: 'search' }]);
    expect((await rt.result('new', 'found again')).name).toBe('search');
    expect(loads.every((l) => l.window && l.logStart > 0)).toBe(true);
    expect(loads).toHaveLength(4);
    // The gate still decides a call an assistant message made and the gate never saw.
    expect(await rt.gate('new', 'search')).toEqual({ execute: true });
    expect((await rt.engine.inspect(TENANT, rt.sessionId)).calls.map((c) => [c.callId, c.status])).toEqual([
      ['gated', 'executed'],
      ['new', 'executed'],
    ]);
  });

  it('a tool message for a call before the window: appended from its record, a repeat answered from the whole log', async () => {
    const { store, loads } = reading(newStore());
    const rt = runtimeOn(store);
    await rt.open();
    await rt.turn(1);
    // A call only the gate knows (no assistant message made it).
    await rt.gate('side', 'lookup');
    await rt.say('user', 'question 2');
    await rt.step();
    await rt.say('assistant', '', [{ callId: 'made', name: 'search' }]);
    await rt.result('made', 'found');
    await rt.step();
    await rt.say('assistant', 'answer 2');
    await rt.turn(3);
    await rt.turn(4);
    loads.length = 0;

    const side = await rt.result('side', 'side result');
    expect(side).toMatchObject({ role: 'tool', callId: 'side', name: 'lookup', content: 'side result' });
    expect(loads.map((l) => l.window)).toEqual([true]);
    await rt.turn(5);
    await rt.turn(6);
    loads.length = 0;
    // Results the log has before the window: the repeat is answered with the entry, a new content refused.
    expect(await rt.result('side', 'side result')).toEqual(side);
    const made = (await rt.engine.inspect(TENANT, rt.sessionId)).log.find(
      (e) => 'callId' in e && e.role === 'tool' && e.callId === 'made',
    )!;
    expect(await rt.result('made', 'found')).toEqual(made);
    await expect(rt.result('made', 'other')).rejects.toMatchObject({
      code: 'validation_error',
      message: `message: the call of callId already has a result (seq ${made.seq}); a second result is refused`,
    });
    await expect(rt.result('unknown', 'x')).rejects.toMatchObject({
      code: 'validation_error',
      message: 'message: callId matches no call of an earlier assistant message and no call the gate knows',
    });
    // Each repeat reads its window, then the whole log; the inspection reads it whole; the unknown id, its window.
    expect(loads.map((l) => l.window)).toEqual([true, false, false, true, false, true, false, true]);
  });
});
