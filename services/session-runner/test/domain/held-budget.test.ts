/**
 * Held sessions under a budget smaller than the sessions in use (adapters/session-cache.ts):
 * sessions stepped in turn, as a runtime's sessions are, each with new context before its
 * step. The sessions held stay held and their steps read nothing; only the others read,
 * once a step. On the in-memory store and on Redis.
 */
import { createEngine, type SessionStore } from '@ctxflow/session-runner';
import { describe, expect, it } from 'vitest';
import { engineStores } from './stores.ts';

const TENANT = 'acme';

/** The store with the session of every `load` recorded, in order. */
function recordingLoads(store: SessionStore): { store: SessionStore; loads: string[] } {
  const loads: string[] = [];
  const proxy = new Proxy(store, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (name === 'load') loads.push(String(args[0]));
        return value.apply(target, args);
      };
    },
  });
  return { store: proxy, loads };
}

describe.each(engineStores('held-budget'))(
  'a held budget smaller than the sessions in use on the %s store',
  (_name, newStore) => {
    it('full steps in turn on three sessions, two held: the held two never read, the third reads once a step', async () => {
      const shared = newStore();
      const { store, loads } = recordingLoads(shared);
      const engine = createEngine({ store, heldSessions: 2 });
      const agent = await engine.createAgent(TENANT, { tools: [{ name: 'search' }] });
      const sessions: string[] = [];
      for (let i = 0; i < 3; i++)
        sessions.push((await engine.createSession(TENANT, { agentId: agent.agentId })).sessionId);
      const [a, b, c] = sessions as [string, string, string];

      const rounds = 3;
      for (let round = 0; round < rounds; round++) {
        for (const sessionId of sessions) {
          await engine.addContext(TENANT, { sessionId, items: [{ kind: 'notice', content: `round ${round}` }] });
          const answer = await engine.step(TENANT, sessionId, { requestId: `req-${round}` });
          expect(answer.rows.map((r) => r.content)).toEqual([`round ${round}`]);
        }
      }
      expect(loads).toEqual([c, c, c]);

      // What the steps answered is the store's: a fresh engine answers the last step alike.
      const fresh = createEngine({ store: shared });
      for (const sessionId of [a, b, c]) {
        const again = await fresh.step(TENANT, sessionId, { requestId: `req-${rounds - 1}` });
        expect(again.request.messages.filter((m) => 'row' in m)).toHaveLength(rounds);
      }
    });
  },
);
