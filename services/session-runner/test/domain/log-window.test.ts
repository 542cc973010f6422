import type { ModelRequest } from '@ctxflow/contracts';
import {
  type ContextEngine,
  createEngine,
  type RunnerTelemetry,
  type SessionStore,
  type StepContextSource,
  type StepResult,
} from '@ctxflow/session-runner';
import { describe, expect, it } from 'vitest';
import { engineStores } from './stores.ts';

const TENANT = 'acme';

const stores = engineStores('window');

/** A hook whose every other batch brings one update, each with the next cursor. */
const ticketHook: StepContextSource = {
  async fetch({ cursor }) {
    const n = (cursor as { n: number } | undefined)?.n ?? 0;
    if (n % 2 === 1) return { items: [], cursor: { n: n + 1 } };
    return { items: [{ kind: 'notice', content: `ticket update ${n + 1}` }], cursor: { n: n + 1 } };
  },
};

/** The store with the log entries each load returned, and whether it was a window read. */
function reading(store: SessionStore): { store: SessionStore; loads: { window: boolean; entries: number }[] } {
  const loads: { window: boolean; entries: number }[] = [];
  const proxy = new Proxy(store, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (name !== 'load') return typeof value === 'function' ? value.bind(target) : value;
      return async (sessionId: string, options?: { window?: boolean }) => {
        const state = await target.load(sessionId, options);
        loads.push({ window: options?.window === true, entries: state?.log.length ?? 0 });
        return state;
      };
    },
  });
  return { store: proxy, loads };
}

/** An engine with named ids, a stepped clock, the ticket hook and its figures recorded. */
function engineOn(store: SessionStore, heldSessions?: number) {
  let id = 0;
  let now = Date.parse('2026-12-01T10:00:00.000Z');
  const figures: { requestBytes: number; prefixReusedBytes: number }[] = [];
  const telemetry: RunnerTelemetry = {
    contextSkipped() {},
    stepCommitted: ({ requestBytes, prefixReusedBytes }) => figures.push({ requestBytes, prefixReusedBytes }),
  };
  const engine = createEngine({
    store,
    ...(heldSessions === undefined ? {} : { heldSessions }),
    newId: (prefix) => `${prefix}_${String(++id).padStart(20, '0')}`,
    clock: { now: () => (now += 1_000) },
    stepContextFor: () => ticketHook,
    telemetry,
  });
  return { engine, figures };
}

/** A runtime that keeps the messages of its last request and asks for deltas (`since`). */
class Runtime {
  messages: ModelRequest['messages'] = [];
  readonly answers: StepResult[] = [];
  /** The whole messages of each step's request, as the runtime has them after its answer. */
  readonly requests: ModelRequest['messages'][] = [];
  readonly engine: ContextEngine;
  readonly sessionId: string;
  /** Whether it asks for deltas (`since`) or whole answers. */
  readonly delta: boolean;
  constructor(engine: ContextEngine, sessionId: string, delta = true) {
    this.engine = engine;
    this.sessionId = sessionId;
    this.delta = delta;
  }

  async step(): Promise<void> {
    const answer = await this.engine.step(TENANT, this.sessionId, this.delta ? { since: this.messages.length } : {});
    this.answers.push(answer);
    const { request } = answer;
    this.messages = request.since ? [...this.messages, ...request.messages] : request.messages;
    this.requests.push(this.messages);
  }

  say(role: 'user' | 'assistant', content: string, toolCalls?: { callId: string; name: string }[]) {
    return this.engine.appendMessage(TENANT, this.sessionId, { role, content, ...(toolCalls ? { toolCalls } : {}) });
  }
}

/**
 * Turns of a ticket agent: app items, tool switches, user messages, delta steps, tool calls with
 * their results, a cold cache (a rebuilt prefix answers in whole).
 */
async function converse(runtime: Runtime, turns: number, coldEvery = 0, first = 1): Promise<void> {
  const { engine, sessionId } = runtime;
  for (let t = first; t < first + turns; t++) {
    if (t % 3 === 0) await engine.addContext(TENANT, { sessionId, items: [{ kind: 'notice', content: `app ${t}` }] });
    if (t % 5 === 0) {
      const item = t % 10 === 0 ? { enable: ['search'] } : { disable: ['search'] };
      await engine.addContext(TENANT, { sessionId, items: [{ kind: 'tools', ...item }] });
    }
    if (coldEvery > 0 && t % coldEvery === 0) await engine.updateSession(TENANT, sessionId, { forceRefresh: true });
    await runtime.say('user', `question ${t}`);
    await runtime.step();
    if (t % 4 === 0) {
      await runtime.say('assistant', '', [{ callId: `call-${t}`, name: 'search' }]);
      await engine.appendMessage(TENANT, sessionId, { role: 'tool', callId: `call-${t}`, content: `found ${t}` });
      await runtime.step();
    }
    await runtime.say('assistant', `answer ${t}`);
  }
}

describe.each(stores)('the log window on the %s store', (_name, newStore) => {
  it('deltas from the log window add up to the whole requests, held or not, with the same figures and log', async () => {
    // full: whole answers (no `since`), so it holds and renders whole logs. unheld: deltas, holds
    // nothing, reads windows. held: deltas, holds what it steps (as windows).
    const full = engineOn(newStore());
    const unheldReads = reading(newStore());
    const unheld = engineOn(unheldReads.store, 0);
    const heldReads = reading(newStore());
    const held = engineOn(heldReads.store);
    const runtimes: Runtime[] = [];
    for (const [{ engine }, delta] of [
      [full, false],
      [unheld, true],
      [held, true],
    ] as const) {
      const agent = await engine.createAgent(TENANT, { context: 'You answer tickets.', tools: [{ name: 'search' }] });
      const { sessionId } = await engine.createSession(TENANT, { agentId: agent.agentId });
      runtimes.push(new Runtime(engine, sessionId, delta));
    }
    for (const runtime of runtimes) await converse(runtime, 24, 11);

    const [whole, fromWindow, fromHeld] = runtimes as [Runtime, Runtime, Runtime];
    expect(fromWindow.answers).toHaveLength(30);
    expect(fromHeld.answers).toEqual(fromWindow.answers);
    // Each delta answer, appended to what the runtime held, is the whole answer.
    expect(fromWindow.requests).toEqual(whole.requests);
    const strip = (answer: StepResult) => ({ ...answer, request: { ...answer.request, messages: [], since: 0 } });
    expect(fromWindow.answers.map(strip)).toEqual(whole.answers.map(strip));
    expect(unheld.figures).toEqual(full.figures);
    expect(held.figures).toEqual(full.figures);
    // Read whole: the first step (a whole answer) and twice per forced refresh (its own read, then
    // the rebuilt step). The 6 assistant messages with calls read their window: the session's call
    // records know the call ids used before it.
    expect(unheldReads.loads.filter((l) => !l.window)).toHaveLength(1 + 2 * 2);
    const windows = unheldReads.loads.filter((l) => l.window).map((l) => l.entries);
    expect(windows).toHaveLength(unheldReads.loads.length - 5);
    expect(Math.max(...windows)).toBeLessThanOrEqual(6);
    // The runner that holds what it steps (it made the session) reads what a window cannot answer,
    // and after each forced refresh (a meta write lets the held state go) the next message's window.
    expect(heldReads.loads.filter((l) => !l.window)).toHaveLength(2 * 2);
    expect(heldReads.loads.filter((l) => l.window)).toHaveLength(2);

    const log = (await full.engine.inspect(TENANT, whole.sessionId)).log;
    expect((await unheld.engine.inspect(TENANT, fromWindow.sessionId)).log).toEqual(log);
    expect((await held.engine.inspect(TENANT, fromHeld.sessionId)).log).toEqual(log);
  });

  it('a step and a message on a session the runner does not hold read as much at turn 70 as at turn 10', async () => {
    const { store, loads } = reading(newStore());
    const creator = engineOn(store).engine;
    const agent = await creator.createAgent(TENANT, { tools: [{ name: 'search' }] });
    const { sessionId } = await creator.createSession(TENANT, { agentId: agent.agentId });
    // Another runner serves the session: it reads windows and holds what it read.
    const runner = new Runtime(engineOn(store).engine, sessionId);
    const unheld = new Runtime(engineOn(store, 0).engine, sessionId);

    let turn = 1;
    const readAt = async (turns: number) => {
      await converse(runner, turns, 0, turn);
      turn += turns;
      loads.length = 0;
      await unheld.say('user', 'one more');
      runner.messages = unheld.messages = [];
      await unheld.step(); // a whole answer: the runtime holds nothing yet
      await unheld.say('user', 'and another');
      await unheld.step();
      await unheld.say('assistant', 'done');
      return loads.map((l) => `${l.window ? 'window' : 'whole'}:${l.entries}`);
    };
    const early = await readAt(10);
    // Turn 70 is shaped as turn 10 (the turns repeat every 60).
    const late = await readAt(60);
    // The message appends and the delta step read a window of the same size; the first step,
    // asked for a whole request, reads the whole log.
    expect(early[0]).toMatch(/^window:/);
    expect(late.filter((l) => l.startsWith('window'))).toEqual(early.filter((l) => l.startsWith('window')));
    expect(late.filter((l) => l.startsWith('whole')).length).toBe(1);
    const wholeEarly = Number(early.find((l) => l.startsWith('whole'))!.split(':')[1]);
    const wholeLate = Number(late.find((l) => l.startsWith('whole'))!.split(':')[1]);
    expect(wholeLate).toBeGreaterThan(wholeEarly);
  });

  it('steps with no user message between them read only what came since the last step, at step 60 as at step 2', async () => {
    // A session fed by its hook and the app alone: the fold follows each step.
    const whole = engineOn(newStore());
    const { store, loads } = reading(newStore());
    const unheld = engineOn(store, 0);
    const runtimes: Runtime[] = [];
    for (const [{ engine }, delta] of [
      [whole, false],
      [unheld, true],
    ] as const) {
      const agent = await engine.createAgent(TENANT, { context: 'You watch tickets.', tools: [{ name: 'search' }] });
      const { sessionId } = await engine.createSession(TENANT, { agentId: agent.agentId });
      runtimes.push(new Runtime(engine, sessionId, delta));
    }
    for (const runtime of runtimes) {
      for (let n = 1; n <= 60; n++) {
        if (n % 3 === 0) {
          await runtime.engine.addContext(TENANT, {
            sessionId: runtime.sessionId,
            items: [{ kind: 'notice', content: `app ${n}` }],
          });
        }
        await runtime.step();
      }
    }
    const [fromWhole, fromWindow] = runtimes as [Runtime, Runtime];
    expect(fromWindow.requests).toEqual(fromWhole.requests);
    expect(unheld.figures).toEqual(whole.figures);
    expect(fromWindow.answers.slice(1).every((a) => (a.request.since ?? 0) > 0)).toBe(true);
    // The first step (a whole answer) reads the whole log; every later one, the empty window after
    // the step before it.
    expect(loads.map((l) => `${l.window ? 'window' : 'whole'}:${l.entries}`)).toEqual([
      'whole:0',
      ...Array.from({ length: 59 }, () => 'window:0'),
    ]);
    const log = (await whole.engine.inspect(TENANT, fromWhole.sessionId)).log;
    expect((await unheld.engine.inspect(TENANT, fromWindow.sessionId)).log).toEqual(log);
  });

  it('a rewind clears the fold: the session is read whole until its next user message', async () => {
    const { store, loads } = reading(newStore());
    const { engine } = engineOn(store, 0);
    const agent = await engine.createAgent(TENANT, {});
    const { sessionId } = await engine.createSession(TENANT, { agentId: agent.agentId });
    const runtime = new Runtime(engine, sessionId);
    await converse(runtime, 3);
    const steps = (await engine.inspect(TENANT, sessionId)).steps;
    await engine.rewind(TENANT, sessionId, { toStepId: steps[0]!.stepId });
    expect((await engine.inspect(TENANT, sessionId)).meta.logFold).toBeUndefined();

    loads.length = 0;
    runtime.messages = [];
    await runtime.say('user', 'after the rewind');
    expect(loads).toEqual([{ window: true, entries: steps[0]!.logEnd }]);
    const fold = (await engine.inspect(TENANT, sessionId)).meta.logFold;
    expect(fold?.at).toBe(steps[0]!.logEnd);
    loads.length = 0;
    await runtime.step();
    // A whole answer (since 0) reads the whole log at once.
    expect(loads).toEqual([{ window: false, entries: steps[0]!.logEnd + 1 }]);
  });
});
