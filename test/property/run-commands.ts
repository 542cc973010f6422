/**
 * Applies generated commands to a context engine (in memory, driven directly)
 * and to the reference model, and checks after every command:
 *   (a) R3: each request is the system prefix, then the rendering of the log
 *       before the step, then the new rows; the previous request of the session
 *       is a prefix unless a rewind, restart or prefix rebuild came between;
 *   (b) every accepted item is in the log or the queue exactly as often as the
 *       model says (never lost, never doubled), and a step drains the queue;
 *   (c) the hook is called with the cursor of the last batch in the log, and the
 *       batches in every log form one chain of cursors (none skipped or repeated);
 *   (d) the active tools equal the model's fold of the log.
 *
 * Longer than 400 lines: the reference model and the command runner must change together (each command's effect on the model beside its call on the engine).
 */

import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { byteLength, type ContextRow, type Cursor } from '@ctxflow/contracts';
import { type ContextEngine, createEngine, type StepResult } from '@ctxflow/session-runner';
import { expect } from 'vitest';
import { ManualClock, RecordingTelemetry, ScriptedHook } from '../support/harness.ts';
import { type Command, type HookSpec, type ItemGen, type Mode, TEXTS } from './commands.ts';
import {
  AGENT_CONTEXT,
  branchModel,
  CACHE_TTL_MS,
  CALL_POOL,
  DECLARED,
  expectedQueued,
  expectedRow,
  FINISH,
  FIRST_THREAD,
  foldActive,
  foldCursor,
  type LiveItem,
  MAX_BYTES,
  type Message,
  type ModelCall,
  type ModelEntry,
  type ModelSession,
  markerOf,
  newSession,
  present,
  type RawItem,
  renderEntry,
  rewindModel,
  sourceOf,
  systemPrefix,
  TENANT,
  TIMEOUT_MS,
} from './session-model.ts';

const MAX_SESSIONS = 4;

/** A session's cache key (Contract v2 `cache.key`): `ctxflow-` and the first 32 hex digits of the SHA-256 of its id. */
function cacheKeyOf(sessionId: string): string {
  return `ctxflow-${createHash('sha256').update(sessionId).digest('hex').slice(0, 32)}`;
}

/** How often each interesting case was reached (for tuning the generators; see the test file). */
export const coverage = new Map<string, number>();
function hit(name: string): void {
  coverage.set(name, (coverage.get(name) ?? 0) + 1);
}

/**
 * `expect(actual).toEqual(expected)`, with a fast path: most comparisons are
 * equal, and vitest's matcher costs far more than the comparison itself.
 */
function same(actual: unknown, expected: unknown, message?: string): void {
  if (isDeepStrictEqual(actual, expected)) return;
  expect(actual, message).toEqual(expected);
}

function withoutId(row: ContextRow): Omit<ContextRow, 'id'> {
  const { id: _id, ...rest } = row;
  return rest;
}

/** The error code a promise rejects with (fails when it resolves). */
async function rejection(promise: Promise<unknown>): Promise<{ code: string; retryable: boolean }> {
  try {
    const value = await promise;
    throw new Error(`expected a refusal, got ${JSON.stringify(value)}`);
  } catch (err) {
    const { code, retryable } = err as { code?: string; retryable?: boolean };
    if (code === undefined) throw err;
    return { code, retryable: retryable ?? true };
  }
}

interface Batch {
  /** The cursor the hook was given when it produced this batch. */
  from: Cursor | undefined;
  cursor: Cursor;
}

export class World {
  readonly engine: ContextEngine;
  readonly clock = new ManualClock();
  readonly hook = new ScriptedHook();
  readonly telemetry = new RecordingTelemetry();
  readonly sessions: ModelSession[] = [];
  readonly batches = new Map<number, Batch>();
  /** Batches that must never reach a log: answered after a timeout, or invalid. */
  readonly neverLand = new Set<number>();
  agentId = '';
  agentContext = AGENT_CONTEXT;
  #agentEdits = 0;
  tools: StepResult['request']['tools'] | undefined;
  #markers = 0;
  #cursor = 0;
  #batch = 0;
  #keys = 0;
  #requests = 0;
  #threads = 0;
  #runs = 0;

  private constructor() {
    this.engine = createEngine({ clock: this.clock, telemetry: this.telemetry, feed: this.hook });
  }

  static async create(): Promise<World> {
    const world = new World();
    const agent = await world.engine.createAgent(TENANT, {
      context: AGENT_CONTEXT,
      tools: [
        { name: 'a', description: 'Tool a' },
        { name: 'b', description: 'Tool b' },
        { name: 'c', description: 'Tool c', needsApproval: true },
      ],
      stepContext: { maxBytes: MAX_BYTES, timeoutMs: TIMEOUT_MS },
      cacheTtlMs: CACHE_TTL_MS,
    });
    world.agentId = agent.agentId;
    const meta = await world.engine.createSession(TENANT, { agentId: agent.agentId, context: FIRST_THREAD });
    world.sessions.push(newSession(meta.sessionId));
    return world;
  }

  // ------------------------------------------------------------------ items

  #marker(): string {
    return `m${++this.#markers}`;
  }

  /** A raw item with a fresh marker; a tool's tools items only switch off (R19). */
  #raw(gen: ItemGen, marker: string, origin: 'app' | 'tool' | 'hook'): RawItem {
    if (gen.kind === 'tools') {
      const raw: RawItem = { kind: 'tools', disable: [...gen.disable, `~${marker}`] };
      if (origin !== 'tool' && gen.enable.length) raw.enable = [...gen.enable];
      return raw;
    }
    const raw: RawItem = { kind: gen.kind, content: `[${marker}] ${TEXTS[gen.text]}` };
    if (origin === 'app' && gen.source !== undefined) raw.source = gen.source;
    return raw;
  }

  #accept(raws: RawItem[], origin: 'app' | 'tool' | 'hook', callId?: string): LiveItem[] {
    return raws.map((raw) => ({
      marker: markerOf(raw)!,
      raw,
      source: sourceOf(raw, origin),
      origin,
      ...(origin === 'tool' && callId !== undefined ? { callId } : {}),
    }));
  }

  #session(s: number): ModelSession {
    return this.sessions[s % this.sessions.length]!;
  }

  /** A session's `cache.key`: a branch keeps the key of the session it was branched from, down to the root. */
  #cacheKey(s: ModelSession): string {
    let root = s;
    for (let origin = s.branchOf; origin !== undefined; origin = root.branchOf) {
      const found = this.sessions.find((m) => m.id === origin);
      if (!found) return cacheKeyOf(origin);
      root = found;
    }
    return cacheKeyOf(root.id);
  }

  // ------------------------------------------------------------------ commands

  async run(command: Command): Promise<void> {
    hit(`cmd:${command.t}`);
    switch (command.t) {
      case 'app':
        await this.#app(this.#session(command.s), command.items, command.keyed);
        break;
      case 'appRepeat':
        await this.#appRepeat(this.#session(command.s), command.pick, command.variant);
        break;
      case 'appInvalid':
        await this.#appInvalid(this.#session(command.s), command.variant);
        break;
      case 'switch': {
        const gen: ItemGen = command.on
          ? { kind: 'tools', disable: [], enable: command.tools }
          : { kind: 'tools', disable: command.tools, enable: [] };
        await this.#app(this.#session(command.s), [gen], false);
        break;
      }
      case 'toolAdd':
        await this.#toolAdd(this.#session(command.s), command);
        break;
      case 'hookAdd': {
        const s = this.#session(command.s);
        const raws = command.items.map((g) => this.#raw(g, this.#marker(), 'hook'));
        await this.#siteAdd(s, {
          callId: `call${command.call % CALL_POOL}`,
          origin: 'hook',
          site: command.site,
          items: raws,
        });
        break;
      }
      case 'siteRepeat':
        await this.#siteRepeat(this.#session(command.s), command.pick, command.same);
        break;
      case 'gate':
        await this.#gate(this.#session(command.s), `call${command.call % CALL_POOL}`, command.tool);
        break;
      case 'approve': {
        // Mostly a call that waits for its approval; sometimes any call, or none.
        const s = this.#session(command.s);
        const waiting = [...s.calls.values()].filter((c) => c.status === 'awaiting_approval');
        const callId =
          waiting.length > 0 && command.call % 4 !== 0
            ? waiting[command.call % waiting.length]!.callId
            : `call${command.call % CALL_POOL}`;
        await this.#approve(s, callId, command.approved);
        break;
      }
      case 'step': {
        const s = this.#session(command.s);
        const requestId = command.withRequestId ? this.#requestId(s) : undefined;
        await this.#step(s, command.mode, requestId, command.hook, false);
        break;
      }
      case 'crash':
        await this.#crash(this.#session(command.s), command);
        break;
      case 'redeliver': {
        const s = this.#session(command.s);
        if (s.requestIds.length === 0) return;
        const requestId = s.requestIds[command.pick % s.requestIds.length]!;
        await this.#step(s, 'first', requestId, command.hook, false);
        break;
      }
      case 'rewind':
        await this.#rewind(this.#session(command.s), command.pick, command.before);
        break;
      case 'branch':
        await this.#branch(this.#session(command.s), command.at);
        break;
      case 'restart': {
        const s = this.#session(command.s);
        const requestId = command.withRequestId ? this.#requestId(s) : undefined;
        await this.#step(s, 'retry', requestId, command.hook, true);
        break;
      }
      case 'message':
        await this.#message(this.#session(command.s), command.role, TEXTS[command.text] || 'ok');
        break;
      case 'thread':
        await this.#thread(this.#session(command.s), command.forceRefresh);
        break;
      case 'advance':
        this.clock.advance(command.ms);
        break;
      case 'agent': {
        // N3: an agent edit applies from the next run of every session.
        this.agentContext = `You help with support tickets (v${++this.#agentEdits}).`;
        await this.engine.updateAgent(TENANT, this.agentId, { context: this.agentContext });
        break;
      }
    }
    if (command.t === 'advance' || command.t === 'agent') return;
    const target = this.#session(command.s);
    await this.check(target);
    if (command.t === 'branch' && this.sessions.at(-1) !== target) await this.check(this.sessions.at(-1)!);
  }

  #requestId(s: ModelSession): string {
    const id = `req${++this.#requests}`;
    s.requestIds.push(id);
    return id;
  }

  // ------------------------------------------------------------------ the app's adds (R12-R14)

  async #app(s: ModelSession, gens: ItemGen[], keyed: boolean): Promise<void> {
    const raws = gens.map((g) => this.#raw(g, this.#marker(), 'app'));
    const key = keyed ? `key${++this.#keys}` : undefined;
    const result = await this.engine.addContext(TENANT, { sessionId: s.id, items: raws, ...(key ? { key } : {}) });
    expect(result).toEqual({ recorded: raws.length });
    s.queue.push(...this.#accept(raws, 'app'));
    s.appAdds.push({ items: raws, ...(key ? { key } : {}) });
    if (key) s.keys.set(key, raws);
  }

  /** R13: the same key with the same items records 0; with other items it is refused whole. */
  async #appRepeat(s: ModelSession, pick: number, variant: 'same' | 'changed' | 'more' | 'fewer'): Promise<void> {
    if (s.appAdds.length === 0) return;
    const add = s.appAdds[pick % s.appAdds.length]!;
    if (add.key === undefined) {
      // Without a key every call is a new request: the same items are recorded again.
      const result = await this.engine.addContext(TENANT, { sessionId: s.id, items: add.items });
      expect(result).toEqual({ recorded: add.items.length });
      s.queue.push(...this.#accept(add.items, 'app'));
      return;
    }
    if (variant === 'same') {
      const result = await this.engine.addContext(TENANT, { sessionId: s.id, items: add.items, key: add.key });
      expect(result).toEqual({ recorded: 0 });
      return;
    }
    const extra: RawItem = { kind: 'notice', content: `[${this.#marker()}] one more` };
    const items =
      variant === 'changed'
        ? [{ kind: 'notice', content: `[${this.#marker()}] changed` }, ...add.items.slice(1)]
        : variant === 'more'
          ? [...add.items, extra]
          : add.items.slice(1);
    const refusal = await rejection(this.engine.addContext(TENANT, { sessionId: s.id, items, key: add.key }));
    expect(refusal).toEqual({ code: 'state_context_key_conflict', retryable: false });
  }

  /** R9, R14, R19: refusals record nothing (checked by the model comparison after the command). */
  async #appInvalid(s: ModelSession, variant: number): Promise<void> {
    const valid = (): RawItem => ({ kind: 'notice', content: `[${this.#marker()}] fine` });
    const add = (items: unknown, key?: string) =>
      this.engine.addContext(TENANT, { sessionId: s.id, items, ...(key ? { key } : {}) });
    switch (variant) {
      case 0:
        expect(await rejection(add([valid(), { kind: 'notice', content: 'x', source: 'hook' }]))).toMatchObject({
          code: 'validation_error',
        });
        break;
      case 1:
        expect(await rejection(add([{ kind: 'bogus', content: 'x' }]))).toMatchObject({ code: 'validation_error' });
        break;
      case 2:
        expect(await rejection(add([valid(), { kind: 'tools', disable: ['a', FINISH] }]))).toMatchObject({
          code: 'validation_error',
        });
        break;
      case 3:
        expect(await rejection(add([{ kind: 'notice', content: 'x'.repeat(33 * 1024) }]))).toMatchObject({
          code: 'validation_error',
        });
        break;
      case 4:
        expect(await rejection(add([valid(), { kind: 'tools' }]))).toMatchObject({ code: 'validation_error' });
        break;
      case 5:
        expect(
          await rejection(this.engine.addContext(TENANT, { sessionId: 'ses_missing', items: [valid()] })),
        ).toMatchObject({ code: 'state_session_not_found' });
        break;
      case 6: {
        // A tool may switch tools off, never on (R19).
        const calls = [...s.calls.keys()];
        const callId = calls[0] ?? 'call0';
        expect(
          await rejection(
            this.engine.addCallContext(TENANT, s.id, {
              callId,
              origin: 'tool',
              site: 'enable',
              items: [{ kind: 'tools', enable: ['a'] }],
            }),
          ),
        ).toMatchObject({ code: 'validation_error' });
        break;
      }
      default: {
        // A refused request does not consume its key.
        const key = `key${++this.#keys}`;
        expect(await rejection(add([{ kind: 'bogus' }], key))).toMatchObject({ code: 'validation_error' });
        const raws = [valid()];
        expect(await add(raws, key)).toEqual({ recorded: 1 });
        s.queue.push(...this.#accept(raws, 'app'));
        s.appAdds.push({ key, items: raws });
        s.keys.set(key, raws);
      }
    }
  }

  // ------------------------------------------------------------------ tools' and hooks' adds (R7, R10, R15)

  async #toolAdd(s: ModelSession, command: Extract<Command, { t: 'toolAdd' }>): Promise<void> {
    const calls = [...s.calls.values()];
    if (calls.length === 0) return;
    const call = calls[command.call % calls.length]!;
    const raws = command.items.map((g) => {
      const raw = this.#raw(g, this.#marker(), 'tool');
      // R8: whatever the item says, a tool's item carries source tool.
      return command.claimApp && raw.kind !== 'tools' ? { ...raw, source: 'app' } : raw;
    });
    await this.#siteAdd(s, { callId: call.callId, origin: 'tool', site: command.site, items: raws });
  }

  async #siteRepeat(s: ModelSession, pick: number, same: boolean): Promise<void> {
    if (s.siteAdds.length === 0) return;
    const add = s.siteAdds[pick % s.siteAdds.length]!;
    const items = same ? add.items : [{ kind: 'notice', content: `[${this.#marker()}] rerun with other text` }];
    await this.#siteAdd(s, { ...add, items });
  }

  /**
   * First-wins per call site: a repeat records nothing while what the site
   * recorded is still in the log or the queue (recording it again would double
   * it); a site never used records its items. When the site's items are gone
   * (dropped with their call, or never copied into this branch) either answer
   * is accepted.
   */
  async #siteAdd(
    s: ModelSession,
    add: { callId: string; origin: 'tool' | 'hook'; site?: string | undefined; items: RawItem[] },
  ): Promise<void> {
    const call = s.calls.get(add.callId);
    const siteName = add.site ?? (add.origin === 'tool' ? (call?.name ?? 'tool') : 'hook');
    const siteKey = `${add.callId}|${add.origin}:${siteName}`;
    const known = s.sites.get(siteKey);
    const result = await this.engine.addCallContext(TENANT, s.id, {
      callId: add.callId,
      origin: add.origin,
      items: add.items,
      ...(add.site === undefined ? {} : { site: add.site }),
    });
    s.siteAdds.push({
      callId: add.callId,
      origin: add.origin,
      items: add.items,
      ...(add.site ? { site: add.site } : {}),
    });
    hit(known ? (present(s, known.live) ? 'site:repeat-present' : 'site:repeat-gone') : 'site:first');
    if (known && present(s, known.live) && s.branchOf !== undefined) hit('site:repeat-present-in-branch');
    if (known && present(s, known.live) && !call) hit(`site:repeat-present-no-call:${add.origin}`);
    if (known && present(s, known.live)) {
      expect(result, `site ${siteKey} repeated while its items are in the session`).toEqual({ recorded: 0 });
      return;
    }
    if (!known) expect(result).toEqual({ recorded: add.items.length });
    else expect([0, add.items.length]).toContain(result.recorded);
    if (result.recorded === 0) return;
    const live = this.#accept(add.items, add.origin, add.callId);
    s.queue.push(...live);
    s.sites.set(siteKey, { live });
  }

  // ------------------------------------------------------------------ the tool gate (R17, R20, R21)

  async #gate(s: ModelSession, callId: string, name: string): Promise<void> {
    const decision = await this.engine.gateToolCall(TENANT, s.id, { callId, name });
    const existing = s.calls.get(callId);
    if (existing) {
      expect(decision).toEqual(decisionOf(existing));
      return;
    }
    const call: ModelCall = { callId, name, stepIndex: s.steps.length, status: 'executed' };
    if (!(DECLARED as readonly string[]).includes(name)) {
      call.status = 'refused';
      call.reason = 'tool_unavailable';
    } else if (!foldActive(s.log).includes(name)) {
      call.status = 'refused';
      call.reason = 'tool_inactive';
    } else if (name === 'c') {
      call.status = 'awaiting_approval';
    }
    expect(decision).toEqual(decisionOf(call));
    s.calls.set(callId, call);
  }

  async #approve(s: ModelSession, callId: string, approved: boolean): Promise<void> {
    const call = s.calls.get(callId);
    if (!call) {
      expect(await rejection(this.engine.answerApproval(TENANT, s.id, callId, approved))).toMatchObject({
        code: 'state_call_not_found',
      });
      return;
    }
    const decision = await this.engine.answerApproval(TENANT, s.id, callId, approved);
    if (call.status !== 'awaiting_approval') {
      expect(decision).toEqual(decisionOf(call));
      return;
    }
    if (!approved) {
      call.status = 'denied';
      hit('approval:denied');
    } else {
      // R21: a switch-off in the log or still queued refuses the approved call.
      const queuedOff = s.queue.some((i) => i.raw.kind === 'tools' && i.raw.disable?.includes(call.name));
      call.status = !foldActive(s.log).includes(call.name) || queuedOff ? 'refused' : 'executed';
      hit(`approval:${call.status}${queuedOff && foldActive(s.log).includes(call.name) ? '-by-queued-switch' : ''}`);
      if (call.status === 'refused') call.reason = 'tool_inactive';
    }
    expect(decision).toEqual(decisionOf(call));
  }

  // ------------------------------------------------------------------ messages and thread context

  async #message(s: ModelSession, role: 'user' | 'assistant' | 'tool', content: string): Promise<void> {
    await this.engine.appendMessage(TENANT, s.id, { role, content });
    s.log.push({ type: 'message', role, content });
    if (role === 'user' && s.run) s.run.open = false;
  }

  /** N4, N5: thread context is staged until the next rebuild; forceRefresh asks for one. */
  async #thread(s: ModelSession, forceRefresh: boolean): Promise<void> {
    const text = `Thread notes v${++this.#threads}.`;
    const answer = await this.engine.updateSession(TENANT, s.id, { context: text, forceRefresh });
    s.thread.staged = text;
    if (forceRefresh) s.forceRefresh = true;
    expect(answer).toEqual({ staged: true, forceRefresh: s.forceRefresh });
  }

  // ------------------------------------------------------------------ rewinds and branches (R28, R29, R32)

  async #rewind(s: ModelSession, pick: number, before: boolean): Promise<void> {
    if (s.steps.length === 0) {
      expect(await rejection(this.engine.rewind(TENANT, s.id, { toStepId: 'stp_missing' }))).toMatchObject({
        code: 'state_step_not_found',
      });
      return;
    }
    const target = s.steps[pick % s.steps.length]!;
    const queuedBefore = s.queue.length;
    const answer = await this.engine.rewind(
      TENANT,
      s.id,
      before ? { beforeStepId: target.stepId } : { toStepId: target.stepId },
    );
    const requeued = rewindModel(s, target, before);
    hit(requeued > 0 ? 'rewind:requeued' : 'rewind:none-requeued');
    if (s.queue.length < queuedBefore + requeued) hit('rewind:dropped-with-call');
    expect(answer).toEqual({
      logLength: s.log.length,
      requeued,
      queued: s.queue.length,
      cursor: foldCursor(s.log) ?? null,
      activeTools: foldActive(s.log),
    });
  }

  async #branch(s: ModelSession, at: number | undefined): Promise<void> {
    if (this.sessions.length >= MAX_SESSIONS) return;
    const target = at === undefined || s.steps.length === 0 ? undefined : s.steps[at % s.steps.length]!;
    const meta = await this.engine.branch(TENANT, s.id, target ? { atStepId: target.stepId } : {});
    this.sessions.push(branchModel(s, meta.sessionId, target));
  }

  // ------------------------------------------------------------------ steps (R2, R3, R22-R27, R30, R31, R33)

  /** A step (or a restart) whose answer is thrown away, then the same request delivered again. */
  async #crash(s: ModelSession, command: Extract<Command, { t: 'crash' }>): Promise<void> {
    const requestId = this.#requestId(s);
    const mode = command.restart ? 'retry' : command.mode;
    await this.#step(s, mode, requestId, command.hook, command.restart);
    if (command.between) await this.#app(s, [command.between], false);
    await this.check(s);
    await this.#step(s, mode, requestId, { type: 'batch', items: [{ kind: 'notice', text: 1 }] }, command.restart);
  }

  /** Scripts the hook for one step; `produced()` is the batch it answered, if any. */
  #script(spec: HookSpec): { produced: () => number | undefined; reset: () => void } {
    let produced: number | undefined;
    this.hook.script = (request) => {
      const fresh = () => {
        produced = ++this.#batch;
        const cursor = ++this.#cursor;
        this.batches.set(produced, { from: request.cursor, cursor });
        return { n: produced, cursor };
      };
      switch (spec.type) {
        case 'batch':
        case 'oversize': {
          const { n, cursor } = fresh();
          return { items: batchRaws(n, spec), cursor };
        }
        case 'none':
          return undefined;
        case 'empty':
          return { items: [], cursor: ++this.#cursor };
        case 'throw':
          throw new Error('ticket feed unavailable');
        case 'timeout': {
          const { n, cursor } = fresh();
          this.neverLand.add(n);
          return new Promise((resolve) => {
            request.signal.addEventListener(
              'abort',
              () => resolve({ items: batchRaws(n, { type: 'batch', items: [{ kind: 'notice', text: 1 }] }), cursor }),
              { once: true },
            );
          });
        }
        case 'invalid': {
          const { n, cursor } = fresh();
          this.neverLand.add(n);
          const good = batchRaws(n, { type: 'batch', items: [{ kind: 'notice', text: 0 }] });
          return [
            'not an object',
            { items: [...good, { kind: 'bogus', content: 'x' }], cursor },
            { items: good, cursor, extra: true },
            { items: 'nope', cursor },
            { items: [...good, { kind: 'tools', disable: [FINISH] }], cursor },
            [good],
          ][spec.variant % 6];
        }
      }
    };
    return {
      produced: () => produced,
      reset: () => {
        this.hook.script = () => undefined;
      },
    };
  }

  async #step(
    s: ModelSession,
    mode: Mode,
    requestId: string | undefined,
    spec: HookSpec,
    restart: boolean,
  ): Promise<void> {
    const hookCalls = this.hook.calls.length;
    const done = requestId === undefined ? undefined : s.steps.find((st) => st.requestId === requestId);
    if (done) {
      // A redelivered request: the same answer, nothing committed, the hook not called.
      const before = await this.engine.inspect(TENANT, s.id);
      const script = this.#script(spec);
      const answer = restart
        ? await this.engine.restartRun(TENANT, s.id, { requestId: requestId! })
        : await this.engine.step(TENANT, s.id, { mode, requestId: requestId! });
      script.reset();
      const { skipped: _a, ...original } = done.answer;
      const { skipped: _b, ...again } = answer;
      hit('step:replayed');
      // The cache key is the session's (a branch's is its origin's): a branch answers a request its
      // source committed with its own.
      same(
        again,
        { ...original, cache: { ...original.cache, key: this.#cacheKey(s) } },
        `redelivery of ${requestId} answers step ${done.stepId} again`,
      );
      expect(this.hook.calls.length, 'a redelivery does not call the hook').toBe(hookCalls);
      const after = await this.engine.inspect(TENANT, s.id);
      same(
        { log: after.log, queue: after.queue, steps: after.steps },
        { log: before.log, queue: before.queue, steps: before.steps },
        'a redelivery commits nothing',
      );
      return;
    }

    let lastRequest = s.lastRequest;
    if (restart && s.run) {
      // R31: a restart rewinds to the start of the session's last run, then runs a step.
      const first = s.steps.find((st) => st.runId === s.run!.runId);
      if (first) {
        rewindModel(s, first, true);
        lastRequest = s.lastRequest;
      }
    }
    const now = this.clock.now();
    hit(`hook:${spec.type}`);
    // N3, N4: a run freezes the agent context; the prefix is rebuilt only for a reason.
    const freshRun = !s.run?.open;
    const runAgent = freshRun ? this.agentContext : s.run!.agentContext;
    const rebuild =
      s.system === undefined
        ? 'new_thread'
        : s.forceRefresh
          ? 'force_refresh'
          : freshRun && runAgent !== s.prefixAgent
            ? 'agent_context'
            : s.lastStepAt !== undefined && now - s.lastStepAt > CACHE_TTL_MS
              ? 'cache_cold'
              : undefined;
    const system = rebuild ? systemPrefix(runAgent, s.thread.staged ?? s.thread.live) : s.system!;
    const cursor = foldCursor(s.log);
    const skippedBefore = this.telemetry.skipped.length;

    const script = this.#script(spec);
    const answer = restart
      ? await this.engine.restartRun(TENANT, s.id, requestId === undefined ? {} : { requestId })
      : await this.engine.step(TENANT, s.id, { mode, ...(requestId === undefined ? {} : { requestId }) });
    script.reset();

    // R22, (c): one hook call per model call, from the cursor of the last batch in the log.
    expect(this.hook.calls.length, 'the hook runs once before every model call').toBe(hookCalls + 1);
    expect(this.hook.calls.at(-1)).toEqual({ sessionId: s.id, cursor });
    const produced = script.produced();

    // (b), R7: the queue is drained in order, each item becoming exactly its row.
    expect(answer.rows.length).toBeGreaterThanOrEqual(s.queue.length);
    const queueRows = answer.rows.slice(0, s.queue.length);
    same(
      queueRows.map((r) => markerOf(r)),
      s.queue.map((i) => i.marker),
      'queued items are delivered once each, in order',
    );
    const entries: ModelEntry[] = s.queue.map((item, i) => {
      same(withoutId(queueRows[i]!), expectedRow(item.raw, item.source));
      return { type: 'row', row: queueRows[i]!, item };
    });

    // R23-R27: the hook's batch (or nothing) after the queue.
    const hookRows = answer.rows.slice(s.queue.length);
    entries.push(...this.#expectHookRows(spec, hookRows, produced));
    const expectedSkip =
      spec.type === 'throw'
        ? 'hook_error'
        : spec.type === 'timeout'
          ? 'hook_timeout'
          : spec.type === 'invalid'
            ? 'hook_invalid'
            : undefined;
    expect(answer.skipped.map((k) => k.reason)).toEqual(expectedSkip ? [expectedSkip] : []);
    expect(this.telemetry.skipped.slice(skippedBefore)).toEqual(
      expectedSkip
        ? [{ sessionId: s.id, stepId: answer.stepId, reason: expectedSkip, message: answer.skipped[0]!.message }]
        : [],
    );

    // (a), R3: system prefix, the log before the step, then the new rows.
    const messages: Message[] = [
      { role: 'system', content: system },
      ...s.log.map(renderEntry),
      ...entries.map(renderEntry),
    ];
    same(answer.request.messages, messages, '(a) the request is the prefix, the log, then the new rows');
    if (lastRequest) {
      // The log part of the previous request is never changed; with the same prefix, all of it.
      same(answer.request.messages.slice(1, lastRequest.length), lastRequest.slice(1), 'R3: the log part only grows');
      if (lastRequest[0]!.content === system) {
        same(answer.request.messages.slice(0, lastRequest.length), lastRequest, 'R3: the previous request is a prefix');
      }
    }
    hit(`cache:${rebuild ?? 'warm'}`);
    if (s.queue.length > 0) hit('step:drained-queue');
    if (s.queue.some((i) => i.origin === 'tool')) hit('step:delivered-tool-item');
    expect(answer.cache).toEqual({
      ...(rebuild ? { rebuilt: true, reason: rebuild } : { rebuilt: false, reason: null }),
      key: this.#cacheKey(s),
      prefixEnd: 0,
      previousEnd: s.requestEnd ?? 0,
    });
    if (!rebuild && s.system !== undefined) expect(system).toBe(s.system);
    expect(answer.mode).toBe(mode);

    // (d), R16: the offered tools never change; the active ones are the fold of the log.
    const log = [...s.log, ...entries];
    this.tools ??= answer.request.tools;
    same(answer.request.tools, this.tools);
    expect(answer.request.tools.map((t) => t.name)).toEqual([...DECLARED]);
    same(answer.request.activeTools, foldActive(log), '(d) active tools');
    same(answer.cursor, foldCursor(log) ?? null, 'the cursor of the last batch in the log');

    // The model follows.
    if (rebuild) {
      s.thread = { live: s.thread.staged ?? s.thread.live };
      s.forceRefresh = false;
      s.prefixAgent = runAgent;
    }
    s.system = system;
    s.lastStepAt = now;
    if (freshRun || !s.run)
      s.run = { runId: ++this.#runs, startLength: s.log.length, open: true, agentContext: runAgent };
    s.steps.push({
      stepId: answer.stepId,
      ordinal: s.steps.length + 1,
      logStart: s.log.length,
      logEnd: log.length,
      runId: s.run.runId,
      messages,
      system,
      answer,
      ...(requestId === undefined ? {} : { requestId }),
    });
    s.log = log;
    s.queue = [];
    s.lastRequest = messages;
    s.requestEnd = messages.length;
  }

  /** The rows a hook answer must give (R23, R25-R27), as model entries. */
  #expectHookRows(spec: HookSpec, rows: ContextRow[], produced: number | undefined): ModelEntry[] {
    if (spec.type !== 'batch' && spec.type !== 'oversize') {
      expect(rows, `a hook answer of type ${spec.type} writes no row`).toEqual([]);
      return [];
    }
    expect(produced).toBeDefined();
    const batch = this.batches.get(produced!)!;
    const raws = batchRaws(produced!, spec);
    const sourced = raws.map((raw) => ({ ...raw, source: 'hook' }));
    const entry = (row: ContextRow): ModelEntry => ({ type: 'row', row, batch: produced! });
    if (byteLength({ items: sourced, cursor: batch.cursor }) <= MAX_BYTES) {
      same(
        rows.map(withoutId),
        raws.map((raw) => expectedRow(raw, 'hook', batch.cursor)),
      );
      return rows.map(entry);
    }
    hit(`oversize:kept-${rows.length - 1 === 0 ? 'none' : 'some'}`);
    // R27: the items that fit, in order, then one notice saying how many were left out; the cursor advances.
    const kept = rows.length - 1;
    expect(kept).toBeGreaterThanOrEqual(0);
    expect(kept).toBeLessThan(raws.length);
    same(
      rows.slice(0, kept).map(withoutId),
      raws.slice(0, kept).map((raw) => expectedRow(raw, 'hook', batch.cursor)),
    );
    const notice = rows[kept]!;
    expect(notice).toMatchObject({ role: 'context', kind: 'notice', source: 'hook', cursor: batch.cursor });
    expect(notice.content).toMatch(new RegExp(`\\b${raws.length - kept}\\b`));
    const noticeItem = { kind: 'notice', content: notice.content, source: 'hook' };
    expect(byteLength({ items: [...sourced.slice(0, kept), noticeItem], cursor: batch.cursor })).toBeLessThanOrEqual(
      MAX_BYTES,
    );
    // No item that would have fit was left out (8 bytes of slack for the notice's count).
    expect(byteLength({ items: [...sourced.slice(0, kept + 1), noticeItem], cursor: batch.cursor })).toBeGreaterThan(
      MAX_BYTES - 8,
    );
    return rows.map(entry);
  }

  // ------------------------------------------------------------------ the comparison after every command

  /**
   * The engine's view of a session against the model. `full` adds what a user
   * sees (R4), checked once per run.
   */
  async check(s: ModelSession, full = false): Promise<void> {
    const view = await this.engine.inspect(TENANT, s.id);
    const where = `session ${s.id}`;
    // The log, entry by entry: rows exactly as stored, messages as sent.
    same(
      view.log.map((e) => ('row' in e ? { row: e.row } : { role: e.role, content: e.content })),
      s.log.map((e) => (e.type === 'row' ? { row: e.row } : { role: e.role, content: e.content })),
      `${where}: log`,
    );
    // (b): the queue holds exactly the accepted items not yet delivered, each once.
    same(
      view.queue.map((q) => q.item),
      s.queue.map(expectedQueued),
      `${where}: queue`,
    );
    const seen = new Set<LiveItem>();
    for (const item of [...s.queue, ...s.log.flatMap((e) => (e.type === 'row' && e.item ? [e.item] : []))]) {
      if (seen.has(item)) expect.fail(`${where}: item ${item.marker} is more than once in log and queue`);
      seen.add(item);
    }
    // (c): the batches in the log form one chain of cursors, and no late or invalid answer landed.
    let previous: Cursor | undefined;
    let last: number | undefined;
    for (const e of s.log) {
      if (e.type !== 'row' || e.batch === undefined || e.batch === last) continue;
      if (this.neverLand.has(e.batch)) expect.fail(`${where}: batch ${e.batch} must never land`);
      const batch = this.batches.get(e.batch)!;
      same(batch.from, previous, `${where}: batch ${e.batch} follows the batch before it`);
      previous = batch.cursor;
      last = e.batch;
    }
    same(view.cursor, foldCursor(s.log) ?? null, `${where}: cursor`);
    // (d)
    same(view.activeTools, foldActive(s.log), `${where}: active tools`);
    same(
      view.steps.map((st) => [st.stepId, st.ordinal, st.logStart, st.logEnd]),
      s.steps.map((st) => [st.stepId, st.ordinal, st.logStart, st.logEnd]),
      `${where}: steps [stepId, ordinal, logStart, logEnd]`,
    );
    same(view.meta.steps, s.steps.length, `${where}: steps committed`);
    const calls = (list: { callId: string; name: string; stepIndex: number; status: string; reason?: string }[]) =>
      list
        .map((c) => [c.callId, c.name, c.stepIndex, c.status, c.reason ?? null])
        .sort((x, y) => String(x[0]).localeCompare(String(y[0])));
    same(calls(view.calls), calls([...s.calls.values()]), `${where}: calls [callId, name, stepIndex, status, reason]`);
    if (!full) return;
    // R4: a user sees messages only.
    const visible = await this.engine.listMessages(TENANT, s.id);
    same(
      visible.map((m) => ({ role: m.role, content: m.content })),
      s.log.flatMap((e) => (e.type === 'message' ? [{ role: e.role, content: e.content }] : [])),
      `${where}: messages a user sees`,
    );
  }

  /** The end of a run: every session, in full. */
  async finish(): Promise<void> {
    for (const s of this.sessions) await this.check(s, true);
  }
}

/** The items of the hook's batch number `n`, each carrying the batch marker `b<n>.<index>`. */
function batchRaws(n: number, spec: Extract<HookSpec, { type: 'batch' | 'oversize' }>): RawItem[] {
  if (spec.type === 'oversize') {
    return spec.sizes.map((size, i) => ({ kind: 'notice', content: `[b${n}.${i}] ${'x'.repeat(size)}` }));
  }
  return spec.items.map((g, i) => {
    const marker = `b${n}.${i}`;
    if (g.kind === 'tools') {
      const raw: RawItem = { kind: 'tools', disable: [...g.disable, `~${marker}`] };
      if (g.enable.length) raw.enable = [...g.enable];
      return raw;
    }
    return { kind: g.kind, content: `[${marker}] ${TEXTS[g.text]}` };
  });
}

function decisionOf(call: ModelCall) {
  switch (call.status) {
    case 'executed':
      return { execute: true };
    case 'awaiting_approval':
      return { execute: false, reason: 'approval_required' };
    case 'denied':
      return { execute: false, reason: 'approval_denied' };
    default:
      return { execute: false, reason: call.reason };
  }
}
