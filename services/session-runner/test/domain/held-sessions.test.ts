/**
 * The session states a runner holds between steps (session-cache.ts): a step of a
 * held session reads nothing and commits in one write naming the held version, and so
 * does an append of messages; a write by another runner in between makes that write a
 * conflict, and it runs again on what the store has. On the in-memory store and on Redis.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createEngine, RedisSessionStore, type SessionStore } from '@ctxflow/session-runner';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { monitorRedis } from '../../../../test/support/redis-monitor.ts';
import { requireRedis } from '../../../../test/support/services.ts';
import { engineStores } from './stores.ts';

const TENANT = 'acme';
const notice = (content: string) => ({ kind: 'notice' as const, content });

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

const stores = engineStores('held');

describe.each(stores)('held sessions on the %s store', (_name, newStore) => {
  it('a step of a held session reads nothing: one commit, and the agent is read at the run start only', async () => {
    const { store, calls } = recording(newStore());
    const engine = createEngine({ store });
    const agent = await engine.createAgent(TENANT, { tools: [{ name: 'search' }] });
    const { sessionId } = await engine.createSession(TENANT, { agentId: agent.agentId });

    await engine.addContext(TENANT, { sessionId, items: [notice('first')] });
    calls.length = 0;
    const first = await engine.step(TENANT, sessionId);
    expect(calls).toEqual(['getAgent', 'commitStep']);
    expect(first.rows.map((r) => r.content)).toEqual(['first']);

    await engine.addContext(TENANT, { sessionId, items: [notice('second')] });
    await engine.appendMessage(TENANT, sessionId, { role: 'assistant', content: 'looking' });
    calls.length = 0;
    const second = await engine.step(TENANT, sessionId, { requestId: 'req-2' });
    expect(calls).toEqual(['commitStep']);
    expect(second.rows.map((r) => r.content)).toEqual(['second']);
    // The held request is the stored one, byte for byte.
    const fresh = createEngine({ store });
    expect((await fresh.step(TENANT, sessionId, { requestId: 'req-2' })).request).toEqual(second.request);
  });

  it("another runner's items in between: the held commit is refused and the pass delivers them", async () => {
    const shared = newStore();
    const mine = recording(shared);
    const engine = createEngine({ store: mine.store });
    const other = createEngine({ store: shared });
    const { sessionId } = await engine.createSession(TENANT, {});
    await engine.step(TENANT, sessionId);

    await other.addContext(TENANT, { sessionId, items: [notice('from the other runner')] });
    mine.calls.length = 0;
    const step = await engine.step(TENANT, sessionId);
    expect(mine.calls).toEqual(['commitStep', 'load', 'commitStep']);
    expect(step.rows.map((r) => r.content)).toEqual(['from the other runner']);
    const inspected = await engine.inspect(TENANT, sessionId);
    expect(inspected.queue).toEqual([]);
    expect(inspected.steps.map((s) => s.rowIds.length)).toEqual([0, 1]);
  });

  it("another runner's thread context edit is not overwritten by a held step", async () => {
    const shared = newStore();
    const engine = createEngine({ store: shared });
    const other = createEngine({ store: shared });
    const { sessionId } = await engine.createSession(TENANT, { context: 'Be brief.' });
    await engine.step(TENANT, sessionId);

    await other.updateSession(TENANT, sessionId, { context: 'Be thorough.', forceRefresh: true });
    const step = await engine.step(TENANT, sessionId);
    expect(step.cache).toEqual({
      rebuilt: true,
      reason: 'force_refresh',
      key: `ctxflow-${createHash('sha256').update(sessionId).digest('hex').slice(0, 32)}`,
      prefixEnd: 0,
      previousEnd: 1,
    });
    expect(step.request.messages[0]?.content).toContain('Be thorough.');
  });

  it('a redelivered request this runner committed is answered from the store, its pass not run again', async () => {
    const { store, calls } = recording(newStore());
    const engine = createEngine({ store });
    const { sessionId } = await engine.createSession(TENANT, {});
    await engine.addContext(TENANT, { sessionId, items: [notice('once')] });
    const committed = await engine.step(TENANT, sessionId, { requestId: 'req-1' });
    calls.length = 0;
    const again = await engine.step(TENANT, sessionId, { requestId: 'req-1' });
    expect(again).toEqual({ ...committed, skipped: [] });
    expect(calls).not.toContain('commitStep');
    expect((await engine.inspect(TENANT, sessionId)).steps).toHaveLength(1);
  });

  it('messages appended to a held session read nothing: one append naming the held version', async () => {
    const { store, calls } = recording(newStore());
    const engine = createEngine({ store });
    const { sessionId } = await engine.createSession(TENANT, {});
    await engine.step(TENANT, sessionId);
    calls.length = 0;
    await engine.appendMessage(TENANT, sessionId, { role: 'user', content: 'Is it fixed?' });
    await engine.appendMessages(TENANT, sessionId, [
      { role: 'assistant', content: 'Searching.', toolCalls: [{ callId: 'c1', name: 'search', arguments: '{}' }] },
      { role: 'tool', content: 'Fixed in 2.14.1.', callId: 'c1' },
    ]);
    const step = await engine.step(TENANT, sessionId, { requestId: 'req-2' });
    expect(calls).toEqual(['appendMessages', 'appendMessages', 'commitStep']);
    expect(step.request.messages.map((m) => m.content)).toEqual(['Is it fixed?', 'Searching.', 'Fixed in 2.14.1.']);
    // The held state is what the store has: a runner that holds nothing answers the same request.
    expect((await createEngine({ store }).step(TENANT, sessionId, { requestId: 'req-2' })).request).toEqual(
      step.request,
    );
  });

  it("another runner's messages in between: the held append is refused and made again on a fresh read", async () => {
    const shared = newStore();
    const mine = recording(shared);
    const engine = createEngine({ store: mine.store });
    const other = createEngine({ store: shared });
    const { sessionId } = await engine.createSession(TENANT, {});
    await engine.step(TENANT, sessionId);

    await other.appendMessage(TENANT, sessionId, { role: 'user', content: 'Hello from the other runner.' });
    mine.calls.length = 0;
    await engine.appendMessage(TENANT, sessionId, { role: 'user', content: 'Is it fixed?' });
    expect(mine.calls).toEqual(['appendMessages', 'load', 'appendMessages']);

    await other.appendMessage(TENANT, sessionId, {
      role: 'assistant',
      content: 'Calling search.',
      toolCalls: [{ callId: 'c1', name: 'search', arguments: '{}' }],
    });
    mine.calls.length = 0;
    // The held state knows no call c1: the result is validated again on a fresh read, which has it.
    await engine.appendMessage(TENANT, sessionId, { role: 'tool', content: 'Found it.', callId: 'c1' });
    expect(mine.calls).toEqual(['load', 'appendMessages']);
    expect((await engine.listMessages(TENANT, sessionId)).map((m) => [m.seq, m.content])).toEqual([
      [0, 'Hello from the other runner.'],
      [1, 'Is it fixed?'],
      [2, 'Calling search.'],
      [3, 'Found it.'],
    ]);
  });

  it('a session erased by another runner: a message to the held state is 404, nothing written', async () => {
    const shared = newStore();
    const engine = createEngine({ store: shared });
    const other = createEngine({ store: shared });
    const { sessionId } = await engine.createSession(TENANT, {});
    await engine.step(TENANT, sessionId);
    await other.deleteSession(TENANT, sessionId);
    await expect(
      engine.appendMessage(TENANT, sessionId, { role: 'user', content: 'Still there?' }),
    ).rejects.toMatchObject({ code: 'state_session_not_found' });
    await expect(other.inspect(TENANT, sessionId)).rejects.toMatchObject({ code: 'state_session_not_found' });
  });

  it('heldSessions 0 reads the session on every step', async () => {
    const { store, calls } = recording(newStore());
    const engine = createEngine({ store, heldSessions: 0 });
    const { sessionId } = await engine.createSession(TENANT, {});
    await engine.step(TENANT, sessionId);
    calls.length = 0;
    await engine.step(TENANT, sessionId);
    expect(calls).toEqual(['load', 'commitStep']);
  });

  it('holds at most heldSessions sessions: one beyond them is read at each step, the held ones never', async () => {
    const { store, calls } = recording(newStore());
    const engine = createEngine({ store, heldSessions: 2 });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await engine.createSession(TENANT, {})).sessionId);
    // Created in order a, b, c: c found no room, and a read does not push a held session out.
    for (const round of [1, 2]) {
      calls.length = 0;
      await engine.step(TENANT, ids[2]!);
      expect(calls, `round ${round}`).toEqual(['load', 'commitStep']);
      calls.length = 0;
      await engine.step(TENANT, ids[1]!);
      await engine.step(TENANT, ids[0]!);
      expect(calls, `round ${round}`).toEqual(['commitStep', 'commitStep']);
    }
  });
});

describe('a held step on Redis', () => {
  it('inside a run is one EVALSHA whose script makes five calls: no reads of the queue or meta, no meta write', async () => {
    const client = new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
    const monitor = await monitorRedis(requireRedis());
    const prefix = `ctxtest-held-${randomUUID().slice(0, 8)}`;
    try {
      const engine = createEngine({ store: new RedisSessionStore(client, { prefix }) });
      const agent = await engine.createAgent(TENANT, { context: 'You resolve tickets.', tools: [{ name: 'search' }] });
      const { sessionId } = await engine.createSession(TENANT, { agentId: agent.agentId });
      await engine.step(TENANT, sessionId); // starts the run, builds the prefix
      await engine.addContext(TENANT, { sessionId, items: [notice('one')] });

      // What Redis ran between two markers this client sends around the step.
      const seen: { source: string; command: string; key: string }[] = [];
      const [start, end] = [`${prefix}-start`, `${prefix}-end`];
      let recording = false;
      const ended = new Promise<void>((done) => {
        monitor.on('monitor', (_time: string, args: string[], source: string) => {
          if (args[0] === 'echo') {
            if (args[1] === start) recording = true;
            if (args[1] === end) done();
            return;
          }
          const key = args.find((arg) => arg.startsWith(`${prefix}:`));
          if (recording && key !== undefined) {
            seen.push({ source: source === 'lua' ? 'lua' : 'client', command: args[0]!.toLowerCase(), key });
          }
        });
      });
      await client.echo(start);
      const step = await engine.step(TENANT, sessionId);
      await client.echo(end);
      await ended;

      expect(step.rows.map((r) => r.content)).toEqual(['one']);
      const base = `${prefix}:{${sessionId}}`;
      expect(seen).toEqual([
        { source: 'client', command: 'evalsha', key: `${base}:meta` },
        { source: 'lua', command: 'hmget', key: `${base}:counters` },
        { source: 'lua', command: 'rpush', key: `${base}:log` },
        { source: 'lua', command: 'ltrim', key: `${base}:queue` },
        { source: 'lua', command: 'hset', key: `${base}:steps` },
        { source: 'lua', command: 'hset', key: `${base}:counters` },
      ]);
      // The version this commit issued: the write count, then the client's random nonce.
      expect(await client.hget(`${base}:counters`, 'version')).toMatch(/^\d+\.[0-9a-f]{16}$/);
    } finally {
      monitor.disconnect();
      let cursor = '0';
      do {
        const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
        cursor = next;
        if (keys.length > 0) await client.del(...keys);
      } while (cursor !== '0');
      client.disconnect();
    }
  });
});
