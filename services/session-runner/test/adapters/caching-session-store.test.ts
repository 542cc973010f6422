/**
 * What the caching decorator of the session store keeps (adapters/caching-session-store.ts),
 * beyond the store contract it passes (test/contract/session-store.contract.test.ts): a
 * session's tenant and agent known without a read, the held state following this runner's
 * writes and dropped when another write came between, agents as last read, replayed keys.
 */
import { describe, expect, it } from 'vitest';
import { CachingSessionStore } from '../../src/adapters/caching-session-store.ts';
import { MemorySessionStore } from '../../src/adapters/memory-session-store.ts';
import { LogView } from '../../src/domain/log-view.ts';
import type { AgentRecord, SessionMeta, StepRecord } from '../../src/domain/model.ts';
import type { SessionStore } from '../../src/ports/session-store.ts';

const AT = '2026-03-01T10:00:00.000Z';

/** The store with every method call recorded by name, in order. */
function recording(store: SessionStore): { store: SessionStore; calls: string[] } {
  const calls: string[] = [];
  const proxy = new Proxy(store, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls.push(String(name));
        return value.apply(target, args);
      };
    },
  });
  return { store: proxy, calls };
}

const meta = (sessionId: string, extra: Partial<SessionMeta> = {}): SessionMeta => ({
  sessionId,
  tenant: 'acme',
  createdAt: AT,
  thread: { live: [] },
  forceRefresh: false,
  steps: 0,
  ...extra,
});

const agent: AgentRecord = {
  agentId: 'agt_1',
  tenant: 'acme',
  context: [],
  tools: [{ name: '__finish__' }],
  stepContext: { maxBytes: 32_768, timeoutMs: 5_000 },
  memory: { autoInject: false },
  cacheTtlMs: 300_000,
  createdAt: AT,
  version: 1,
};

const notice = (content: string) => ({ item: { kind: 'notice' as const, source: 'app' as const, content }, at: AT });

describe('CachingSessionStore', () => {
  it('a created session is held, and its tenant and agent are known without a read', async () => {
    const inner = recording(new MemorySessionStore());
    const store = new CachingSessionStore(inner.store);
    const version = await store.createSession(meta('s1', { agentId: 'agt_1' }), [], [], []);
    inner.calls.length = 0;
    expect(store.tenantOf('s1')).toBe('acme');
    expect(store.agentIdOf('s1')).toBe('agt_1');
    expect(store.held('s1')).toEqual({
      meta: meta('s1', { agentId: 'agt_1' }),
      log: [],
      queue: [],
      calls: [],
      sites: [],
      itemSeq: 0,
      requestIds: [],
      version,
    });
    expect(inner.calls).toEqual([]);
  });

  it("an unknown session's tenant is one read of its meta, then known; an absent one stays unknown", async () => {
    const inner = recording(new MemorySessionStore());
    await inner.store.createSession(meta('s1'), [], [], []);
    const store = new CachingSessionStore(inner.store);
    inner.calls.length = 0;
    expect(await store.tenantOf('s1')).toBe('acme');
    expect(store.tenantOf('s1')).toBe('acme');
    expect(await store.tenantOf('s2')).toBeUndefined();
    expect(inner.calls).toEqual(['getMeta', 'getMeta']);
  });

  it("the held state follows this runner's writes: it is what the store loads, at the same version", async () => {
    const store = new CachingSessionStore(new MemorySessionStore());
    await store.createSession(meta('s1'), [], [], []);
    await store.enqueue('s1', [notice('a')], { type: 'site', callId: 'c1', site: 'tool:search' });
    await store.appendMessages('s1', [{ type: 'message', role: 'user', content: 'hi', at: AT }]);
    await store.putCall('s1', { callId: 'c1', name: 'search', stepIndex: 0, status: 'executed' });
    const loaded = await store.load('s1');
    expect(store.held('s1')).toEqual(loaded);
  });

  it('another write in between drops the held state at the next write through the decorator', async () => {
    const shared = new MemorySessionStore();
    const store = new CachingSessionStore(shared);
    await store.createSession(meta('s1'), [], [], []);
    await shared.enqueue('s1', [notice('from another runner')]);
    expect(store.held('s1')).toBeDefined(); // never trusted: a commit on it names its version
    await store.enqueue('s1', [notice('mine')]);
    expect(store.held('s1')).toBeUndefined();
  });

  it('a refused commit, a rewind, a meta edit and an erasure drop the held state', async () => {
    const store = new CachingSessionStore(new MemorySessionStore());
    const step: StepRecord = {
      stepId: 'stp_1',
      ordinal: 1,
      mode: 'first',
      runId: 'run_1',
      logStart: 0,
      logEnd: 0,
      rowIds: [],
      system: '',
      activeTools: [],
      cache: { rebuilt: true, reason: 'new_thread' },
      at: AT,
    };
    const cases: [string, (m: SessionMeta) => Promise<unknown>][] = [
      [
        'refused commit',
        (m) =>
          store.commitStep(m.sessionId, {
            step,
            rows: [],
            drain: [],
            expectedLogLength: 0,
            expectedVersion: 'not the version',
            meta: { ...m, steps: 1 },
          }),
      ],
      [
        'rewind',
        (m) =>
          store.rewind(m.sessionId, {
            expectedLogLength: 0,
            toLength: 0,
            requeue: [],
            dropItems: [],
            dropCalls: [],
            dropSteps: [],
            meta: m,
          }),
      ],
      ['meta edit', (m) => store.putMeta({ ...m, forceRefresh: true })],
      ['erasure', (m) => store.deleteSession(m.sessionId)],
    ];
    for (const [name, write] of cases) {
      const m = meta(`s-${name}`);
      await store.createSession(m, [], [], []);
      await write(m);
      expect([name, store.held(m.sessionId)]).toEqual([name, undefined]);
    }
    expect(await store.tenantOf('s-erasure')).toBeUndefined();
  });

  it('agents as last read are kept until the agent is deleted', async () => {
    const store = new CachingSessionStore(new MemorySessionStore());
    await store.putAgent(agent);
    expect(store.knownAgent('agt_1')).toBeUndefined();
    expect(await store.getAgent('agt_1')).toEqual(agent);
    expect(store.knownAgent('agt_1')).toEqual(agent);
    await store.deleteAgent('agt_1');
    expect(store.knownAgent('agt_1')).toBeUndefined();
  });

  it('replayed request keys are remembered per session and key', () => {
    const store = new CachingSessionStore(new MemorySessionStore());
    store.keyReplayed('s1', 'k', { raw: '[]', fingerprint: 'f' });
    expect(store.replayedKey('s1', 'k')).toEqual({ raw: '[]', fingerprint: 'f' });
    expect(store.replayedKey('s1k', '')).toBeUndefined();
    expect(store.replayedKey('s2', 'k')).toBeUndefined();
  });

  it('messages appended to a held session extend its held view: the view of the held log, its new entries rendered', async () => {
    const store = new CachingSessionStore(new MemorySessionStore());
    const version = await store.createSession(meta('s1'), [], [], []);
    const state = store.held('s1')!;
    store.hold('s1', state, LogView.of(state.log));
    const base = store.heldView('s1')!;
    await store.appendMessages(
      's1',
      [
        { type: 'message', role: 'user', content: 'Hi', at: AT },
        { type: 'message', role: 'assistant', content: 'Hello', at: AT },
      ],
      undefined,
      version,
    );
    const held = store.held('s1')!;
    const view = store.heldView('s1')!;
    expect(view.log).toBe(held.log);
    expect(view.messages).toEqual([
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'Hello' },
    ]);
    expect(view.messages).toEqual(LogView.of(held.log).messages);
    expect(base.messages).toEqual([]);
    // A view of another log than the held one is not held with it.
    store.hold('s1', held, LogView.of(held.log.slice()));
    expect(store.heldView('s1')).toBeUndefined();
  });

  it('heldSessions 0 holds nothing', async () => {
    const store = new CachingSessionStore(new MemorySessionStore(), { heldSessions: 0 });
    await store.createSession(meta('s1'), [], [], []);
    expect(store.held('s1')).toBeUndefined();
    expect(store.tenantOf('s1')).toBe('acme');
  });
});
