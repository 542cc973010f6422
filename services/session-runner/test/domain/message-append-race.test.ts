import { createEngine, type SessionStore } from '@ctxflow/session-runner';
import { describe, expect, it } from 'vitest';
import { engineStores } from './stores.ts';

const TENANT = 'acme';

const stores = engineStores('race');

/** The store, with `between` run once right before the first append that names a version. */
function interleaved(store: SessionStore, between: () => Promise<unknown>): SessionStore {
  let armed = true;
  return new Proxy(store, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (name !== 'appendMessages') return typeof value === 'function' ? value.bind(target) : value;
      return async (...args: unknown[]) => {
        if (armed && args[3] !== undefined) {
          armed = false;
          await between();
        }
        return (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
      };
    },
  });
}

async function toolMessages(engine: ReturnType<typeof createEngine>, sessionId: string) {
  return (await engine.listMessages(TENANT, sessionId)).filter((m) => m.role === 'tool').map((m) => m.content);
}

describe.each(stores)('appends on the %s store with two runners', (_name, newStore) => {
  it('a result recorded by another runner between the read and the append: the append validates again and refuses a second result', async () => {
    const shared = newStore();
    const other = createEngine({ store: shared });
    let sessionId = '';
    const engine = createEngine({
      store: interleaved(shared, () =>
        other.appendMessages(TENANT, sessionId, [{ role: 'tool', callId: 'c1', content: 'theirs' }]),
      ),
    });
    const agent = await other.createAgent(TENANT, { tools: [{ name: 'search' }] });
    sessionId = (await other.createSession(TENANT, { agentId: agent.agentId })).sessionId;
    await other.appendMessages(TENANT, sessionId, [
      { role: 'assistant', content: '', toolCalls: [{ callId: 'c1', name: 'search', arguments: '{}' }] },
    ]);

    await expect(
      engine.appendMessages(TENANT, sessionId, [{ role: 'tool', callId: 'c1', content: 'mine' }]),
    ).rejects.toMatchObject({
      code: 'validation_error',
      message: 'message: the call of callId already has a result (seq 1); a second result is refused',
    });
    expect(await toolMessages(other, sessionId)).toEqual(['theirs']);
  });

  it('the same result recorded by both runners at once is recorded once; both answer its seq', async () => {
    const shared = newStore();
    const other = createEngine({ store: shared });
    let sessionId = '';
    let theirs: number | undefined;
    const engine = createEngine({
      store: interleaved(shared, async () => {
        const [entry] = await other.appendMessages(TENANT, sessionId, [
          { role: 'tool', callId: 'c1', content: 'found' },
        ]);
        theirs = entry?.seq;
      }),
    });
    const agent = await other.createAgent(TENANT, { tools: [{ name: 'search' }] });
    sessionId = (await other.createSession(TENANT, { agentId: agent.agentId })).sessionId;
    await other.appendMessages(TENANT, sessionId, [
      { role: 'assistant', content: '', toolCalls: [{ callId: 'c1', name: 'search', arguments: '{}' }] },
    ]);

    const [mine] = await engine.appendMessages(TENANT, sessionId, [{ role: 'tool', callId: 'c1', content: 'found' }]);
    expect([mine!.seq, theirs]).toEqual([1, 1]);
    expect(await toolMessages(other, sessionId)).toEqual(['found']);
  });

  it("a client's on-time answer while another runner records the runtime's result: recorded once, the answer records nothing", async () => {
    const shared = newStore();
    const other = createEngine({ store: shared });
    let sessionId = '';
    const engine = createEngine({
      store: interleaved(shared, () =>
        other.appendMessages(TENANT, sessionId, [{ role: 'tool', callId: 'q1', content: 'from the runtime' }]),
      ),
    });
    const agent = await other.createAgent(TENANT, { tools: [{ name: 'ask_user', client: true, deadlineMs: 60_000 }] });
    sessionId = (await other.createSession(TENANT, { agentId: agent.agentId })).sessionId;
    await other.appendMessages(TENANT, sessionId, [
      { role: 'assistant', content: '', toolCalls: [{ callId: 'q1', name: 'ask_user', arguments: '{}' }] },
    ]);
    expect(await other.gateToolCall(TENANT, sessionId, { callId: 'q1', name: 'ask_user' })).toMatchObject({
      execute: true,
      client: true,
    });

    expect(await engine.answerClientCall(TENANT, sessionId, 'q1', 'from the client')).toEqual({
      late: false,
      recorded: 0,
    });
    expect(await toolMessages(other, sessionId)).toEqual(['from the runtime']);
  });
});
