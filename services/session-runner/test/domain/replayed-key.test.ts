import { CtxflowError } from '@ctxflow/contracts';
import { createEngine, type SessionStore } from '@ctxflow/session-runner';
import { describe, expect, it } from 'vitest';
import { engineStores } from './stores.ts';

const TENANT = 'acme';
const FRENCH = { kind: 'instruction', content: 'Answer in French.' };
const NO_SEARCH = { kind: 'tools', disable: ['search'] };

/** The store with every method call recorded by name, in order; `override` replaces some methods. */
function recording(
  store: SessionStore,
  override: Partial<Record<keyof SessionStore, (...args: never[]) => unknown>> = {},
): { store: SessionStore; calls: string[] } {
  const calls: string[] = [];
  const proxy = new Proxy(store, {
    get(target, name, receiver) {
      const value = (override as Record<string | symbol, unknown>)[name] ?? Reflect.get(target, name, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls.push(String(name));
        return value.apply(target, args);
      };
    },
  });
  return { store: proxy, calls };
}

/** The items as the HTTP route hands them over: parsed from the request's JSON text. */
const received = (json: string): unknown => JSON.parse(json);

const stores = engineStores('replay');

describe.each(stores)('replayed request keys on the %s store', (_name, newStore) => {
  it('the same raw items again: the first replay takes the full path, the next ones one fingerprint read', async () => {
    const { store, calls } = recording(newStore());
    const engine = createEngine({ store });
    const { sessionId } = await engine.createSession(TENANT, {});
    const json = JSON.stringify([FRENCH, NO_SEARCH]);
    expect(await engine.addContext(TENANT, { sessionId, items: received(json), key: 'k1' })).toEqual({ recorded: 2 });
    const before = await store.load(sessionId);
    calls.length = 0;
    for (let i = 0; i < 4; i++) {
      expect(await engine.addContext(TENANT, { sessionId, items: received(json), key: 'k1' })).toEqual({
        recorded: 0,
      });
    }
    expect(calls).toEqual(['enqueue', 'keyFingerprint', 'keyFingerprint', 'keyFingerprint']);
    expect(await store.load(sessionId)).toEqual(before);
  });

  it('a new key costs no read: every new key is one enqueue', async () => {
    const { store, calls } = recording(newStore());
    const engine = createEngine({ store });
    const { sessionId } = await engine.createSession(TENANT, {});
    calls.length = 0;
    for (const key of ['k1', 'k2', 'k3']) {
      expect(await engine.addContext(TENANT, { sessionId, items: [FRENCH], key })).toEqual({ recorded: 1 });
    }
    expect(calls).toEqual(['enqueue', 'enqueue', 'enqueue']);
  });

  it('raw items longer than 1,024 characters are compared by their SHA-256: still answered from the key', async () => {
    const { store, calls } = recording(newStore());
    const engine = createEngine({ store });
    const { sessionId } = await engine.createSession(TENANT, {});
    const long = (last: string) => JSON.stringify([{ kind: 'notice', content: `${'x'.repeat(2_000)}${last}` }]);
    expect(await engine.addContext(TENANT, { sessionId, items: received(long('a')), key: 'k1' })).toEqual({
      recorded: 1,
    });
    expect(await engine.addContext(TENANT, { sessionId, items: received(long('a')), key: 'k1' })).toEqual({
      recorded: 0,
    });
    calls.length = 0;
    expect(await engine.addContext(TENANT, { sessionId, items: received(long('a')), key: 'k1' })).toEqual({
      recorded: 0,
    });
    expect(calls).toEqual(['keyFingerprint']);
    // One character changed at the end: the full path, and its conflict.
    const refusal = await engine
      .addContext(TENANT, { sessionId, items: received(long('b')), key: 'k1' })
      .catch((error: unknown) => error);
    expect((refusal as CtxflowError).code).toBe('state_context_key_conflict');
    expect(calls).toEqual(['keyFingerprint', 'enqueue']);
  });

  it('the same items in another key order take the full path once, then replay from the key', async () => {
    const { store, calls } = recording(newStore());
    const engine = createEngine({ store });
    const { sessionId } = await engine.createSession(TENANT, {});
    expect(
      await engine.addContext(TENANT, { sessionId, items: received(JSON.stringify([FRENCH])), key: 'k1' }),
    ).toEqual({ recorded: 1 });
    const reordered = JSON.stringify([{ content: 'Answer in French.', kind: 'instruction' }]);
    calls.length = 0;
    expect(await engine.addContext(TENANT, { sessionId, items: received(reordered), key: 'k1' })).toEqual({
      recorded: 0,
    });
    expect(calls).toEqual(['enqueue']);
    calls.length = 0;
    expect(await engine.addContext(TENANT, { sessionId, items: received(reordered), key: 'k1' })).toEqual({
      recorded: 0,
    });
    expect(calls).toEqual(['keyFingerprint']);
    expect((await store.load(sessionId))?.queue).toHaveLength(1);
  });

  it('other items under the key: the full path and its conflict, however often the key replayed', async () => {
    const { store, calls } = recording(newStore());
    const engine = createEngine({ store });
    const { sessionId } = await engine.createSession(TENANT, {});
    const json = JSON.stringify([FRENCH]);
    await engine.addContext(TENANT, { sessionId, items: received(json), key: 'k1' });
    await engine.addContext(TENANT, { sessionId, items: received(json), key: 'k1' });
    const before = await store.load(sessionId);
    calls.length = 0;
    const refusal = await engine
      .addContext(TENANT, { sessionId, items: [{ kind: 'instruction', content: 'Answer in German.' }], key: 'k1' })
      .catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(CtxflowError);
    expect((refusal as CtxflowError).code).toBe('state_context_key_conflict');
    expect(calls).toEqual(['enqueue']);
    expect(await store.load(sessionId)).toEqual(before);
  });

  it("another tenant's byte-identical request is refused as absent before the store is asked", async () => {
    const { store, calls } = recording(newStore());
    const engine = createEngine({ store });
    const { sessionId } = await engine.createSession(TENANT, {});
    const json = JSON.stringify([FRENCH]);
    await engine.addContext(TENANT, { sessionId, items: received(json), key: 'k1' });
    await engine.addContext(TENANT, { sessionId, items: received(json), key: 'k1' });
    calls.length = 0;
    const refusal = await engine
      .addContext('intruder', { sessionId, items: received(json), key: 'k1' })
      .catch((error: unknown) => error);
    expect((refusal as CtxflowError).code).toBe('state_session_not_found');
    expect(calls).toEqual([]);
  });

  it('a store that lost the key record (say, a Redis failover): the full path answers, recording again', async () => {
    const base = newStore();
    let lost = false;
    const { store, calls } = recording(base, {
      keyFingerprint: (sessionId: never, key: never) => (lost ? undefined : base.keyFingerprint(sessionId, key)),
      // Without its key record the store queues as if no key was given.
      enqueue: (sessionId: never, items: never, dedupe: never) =>
        lost ? base.enqueue(sessionId, items) : base.enqueue(sessionId, items, dedupe),
    });
    const engine = createEngine({ store });
    const { sessionId } = await engine.createSession(TENANT, {});
    const json = JSON.stringify([FRENCH]);
    expect(await engine.addContext(TENANT, { sessionId, items: received(json), key: 'k1' })).toEqual({ recorded: 1 });
    expect(await engine.addContext(TENANT, { sessionId, items: received(json), key: 'k1' })).toEqual({ recorded: 0 });
    lost = true;
    calls.length = 0;
    expect(await engine.addContext(TENANT, { sessionId, items: received(json), key: 'k1' })).toEqual({ recorded: 1 });
    expect(calls).toEqual(['keyFingerprint', 'enqueue']);
    expect((await base.load(sessionId))?.queue).toHaveLength(2);
  });
});
