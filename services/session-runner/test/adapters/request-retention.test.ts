/**
 * Request-id retention (adapters/request-retention.ts): a store keeps the request-id records
 * of a session's last `requestIdsKept` steps; a recent request id sent again answers its step,
 * one past the retention runs as a new step, and the step records (the history) all stay. On
 * the in-memory store and on Redis (which deletes the older records every REQUEST_TRIM_EVERY
 * steps, trim-requests.lua). A held state keeps a bounded list of request ids too. The same rule
 * for call records with their call sites, and for app request keys: past the bound the oldest are
 * gone and the newest still deduplicate (the Redis store deletes every RECORD_TRIM_EVERY new calls
 * or keys, put-call.lua and enqueue.lua).
 */
import { randomUUID } from 'node:crypto';
import { createEngine, MemorySessionStore, RedisSessionStore, type SessionStore } from '@ctxflow/session-runner';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { requireRedis } from '../../../../test/support/services.ts';
import { CachingSessionStore } from '../../src/adapters/caching-session-store.ts';
import {
  DEFAULT_REQUEST_IDS_KEPT,
  RECORD_TRIM_EVERY,
  REQUEST_TRIM_EVERY,
} from '../../src/adapters/request-retention.ts';
import { SessionCache } from '../../src/adapters/session-cache.ts';

const TENANT = 'acme';
const KEPT = 5;
/** Two trims on Redis: after them the session keeps exactly KEPT records. */
const STEPS = 2 * REQUEST_TRIM_EVERY;

let redis: Redis | undefined;
const prefix = `ctxtest-retention-${randomUUID().slice(0, 8)}`;
afterAll(async () => {
  if (redis === undefined) return;
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

const stores: [string, () => SessionStore][] = [
  ['memory', () => new MemorySessionStore({ requestIdsKept: KEPT, callIdsKept: KEPT, requestKeysKept: KEPT })],
  [
    'Redis',
    () => {
      redis ??= new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
      return new RedisSessionStore(redis, { prefix, requestIdsKept: KEPT, callIdsKept: KEPT, requestKeysKept: KEPT });
    },
  ],
];

describe.each(stores)('request-id retention on the %s store', (name, newStore) => {
  it(`keeps the records of the last ${KEPT} steps: a recent id answers its step, an older one runs anew`, async () => {
    const store = newStore();
    // Nothing held: every step reads the session's request ids from the store.
    const engine = createEngine({ store, heldSessions: 0 });
    const { sessionId } = await engine.createSession(TENANT, {});
    const stepIds: string[] = [];
    for (let i = 1; i <= STEPS; i++)
      stepIds.push((await engine.step(TENANT, sessionId, { requestId: `req-${i}` })).stepId);

    const kept = Array.from({ length: KEPT }, (_, i) => `req-${STEPS - KEPT + 1 + i}`);
    expect([...(await store.load(sessionId))!.requestIds].sort()).toEqual([...kept].sort());
    if (name === 'Redis') {
      expect((await redis!.hkeys(`${prefix}:{${sessionId}}:requests`)).sort()).toEqual([...kept].sort());
    }
    // Every step record stays.
    expect((await engine.inspect(TENANT, sessionId)).steps).toHaveLength(STEPS);

    const recent = await engine.step(TENANT, sessionId, { requestId: kept[0]! });
    expect(recent.stepId).toBe(stepIds[STEPS - KEPT]);
    const old = await engine.step(TENANT, sessionId, { requestId: 'req-1' });
    expect(stepIds).not.toContain(old.stepId);
    expect((await engine.inspect(TENANT, sessionId)).steps).toHaveLength(STEPS + 1);
  });
});

/** Two trims on Redis: after them the session keeps exactly KEPT calls or keys. */
const RECORDS = 2 * RECORD_TRIM_EVERY;
const item = (n: number) => [
  { item: { kind: 'notice' as const, source: 'app' as const, content: `item ${n}` }, at: new Date(0).toISOString() },
];

describe.each(stores)('call-id and request-key retention on the %s store', (name, newStore) => {
  it(`keeps the call records and call sites of the last ${KEPT} calls: a recent call site deduplicates, an older one records again`, async () => {
    const store = newStore();
    const { sessionId } = await createEngine({ store, heldSessions: 0 }).createSession(TENANT, {});
    for (let i = 1; i <= RECORDS; i++) {
      await store.putCall(sessionId, { callId: `call-${i}`, name: 'search', stepIndex: i, status: 'executed' });
      const site = await store.enqueue(sessionId, item(i), { type: 'site', callId: `call-${i}`, site: 'tool:search' });
      expect(site.outcome).toBe('recorded');
    }
    // A replaced call keeps its place: the newest by first record stay.
    await store.putCall(sessionId, {
      callId: `call-${RECORDS}`,
      name: 'search',
      stepIndex: RECORDS,
      status: 'answered',
    });
    const kept = Array.from({ length: KEPT }, (_, i) => `call-${RECORDS - KEPT + 1 + i}`);
    const state = (await store.load(sessionId))!;
    expect(state.calls.map((c) => c.callId)).toEqual(kept);
    expect(state.calls.at(-1)!.status).toBe('answered');
    expect([...state.sites].sort()).toEqual(kept.map((id) => `${id}|tool:search`).sort());
    if (name === 'Redis') {
      expect((await redis!.hkeys(`${prefix}:{${sessionId}}:calls`)).sort()).toEqual([...kept].sort());
    }
    const recent = await store.enqueue(sessionId, item(0), { type: 'site', callId: kept[0]!, site: 'tool:search' });
    expect(recent.outcome).toBe('replayed');
    const old = await store.enqueue(sessionId, item(0), { type: 'site', callId: 'call-1', site: 'tool:search' });
    expect(old.outcome).toBe('recorded');
  });

  it(`keeps the last ${KEPT} app request keys: a recent key replays or conflicts, an older one records again`, async () => {
    const store = newStore();
    const { sessionId } = await createEngine({ store, heldSessions: 0 }).createSession(TENANT, {});
    for (let i = 1; i <= RECORDS; i++) {
      const recorded = await store.enqueue(sessionId, item(i), {
        type: 'key',
        key: `key-${i}`,
        fingerprint: `fp-${i}`,
      });
      expect(recorded.outcome).toBe('recorded');
    }
    const kept = Array.from({ length: KEPT }, (_, i) => RECORDS - KEPT + 1 + i);
    for (const n of kept) expect(await store.keyFingerprint(sessionId, `key-${n}`)).toBe(`fp-${n}`);
    expect(await store.keyFingerprint(sessionId, 'key-1')).toBeUndefined();
    expect(await store.keyFingerprint(sessionId, `key-${kept[0]! - 1}`)).toBeUndefined();
    if (name === 'Redis') {
      expect((await redis!.hkeys(`${prefix}:{${sessionId}}:keys`)).sort()).toEqual(kept.map((n) => `key-${n}`).sort());
    }
    const first = kept[0]!;
    expect(
      (await store.enqueue(sessionId, item(first), { type: 'key', key: `key-${first}`, fingerprint: `fp-${first}` }))
        .outcome,
    ).toBe('replayed');
    expect(
      (await store.enqueue(sessionId, item(0), { type: 'key', key: `key-${first}`, fingerprint: 'other' })).outcome,
    ).toBe('conflict');
    expect((await store.enqueue(sessionId, item(1), { type: 'key', key: 'key-1', fingerprint: 'fp-1' })).outcome).toBe(
      'recorded',
    );
    expect(await store.keyFingerprint(sessionId, 'key-1')).toBe('fp-1');
  });
});

describe('request ids of a held state', () => {
  it(`are cut to the last ${DEFAULT_REQUEST_IDS_KEPT} once ${REQUEST_TRIM_EVERY} more came`, () => {
    const cache = new SessionCache({ sessions: 10, bytes: 64 * 2 ** 20 });
    const state = (count: number) => ({
      meta: { sessionId: 's', tenant: TENANT } as never,
      log: [],
      queue: [],
      calls: [],
      sites: [],
      itemSeq: 0,
      requestIds: Array.from({ length: count }, (_, i) => `req-${i}`),
      version: String(count),
    });
    const under = DEFAULT_REQUEST_IDS_KEPT + REQUEST_TRIM_EVERY;
    cache.hold('s', state(under));
    expect(cache.get('s')!.requestIds).toHaveLength(under);
    cache.hold('s', state(under + 1));
    const held = cache.get('s')!.requestIds;
    expect(held).toHaveLength(DEFAULT_REQUEST_IDS_KEPT);
    expect(held[0]).toBe(`req-${under + 1 - DEFAULT_REQUEST_IDS_KEPT}`);
    expect(held.at(-1)).toBe(`req-${under}`);
  });
});

describe.each(stores)('call ids of message appends on the %s store', (_name, newStore) => {
  it(`refuses a call id used again within the last ${KEPT} calls before the log window; an older one is a new call`, async () => {
    const store = newStore();
    // Nothing held: every append reads the session's log window and call records from the store.
    const engine = createEngine({ store, heldSessions: 0 });
    const { sessionId } = await engine.createSession(TENANT, {});
    let held = 0;
    const step = async () => {
      const { request } = await engine.step(TENANT, sessionId, { since: held });
      held = (request.since ?? 0) + request.messages.length;
    };
    for (let i = 1; i <= RECORDS; i++) {
      await engine.appendMessage(TENANT, sessionId, { role: 'user', content: `question ${i}` });
      await step();
      await engine.appendMessages(TENANT, sessionId, [
        { role: 'assistant', content: '', toolCalls: [{ callId: `call-${i}`, name: 'search' }] },
        { role: 'tool', callId: `call-${i}`, content: `found ${i}` },
      ]);
      await step();
    }
    await engine.appendMessage(TENANT, sessionId, { role: 'user', content: 'one more' });
    const state = (await store.load(sessionId, { window: true }))!;
    const kept = Array.from({ length: KEPT }, (_, i) => `call-${RECORDS - KEPT + 1 + i}`);
    expect(state.calls.map((c) => c.callId)).toEqual(kept);
    // The window starts after the last call: every kept one is before it.
    expect(state.log.some((e) => e.type === 'message' && e.toolCalls !== undefined)).toBe(false);
    const reuse = (callId: string) =>
      engine.appendMessage(TENANT, sessionId, {
        role: 'assistant',
        content: '',
        toolCalls: [{ callId, name: 'search' }],
      });
    await expect(reuse(kept[0]!)).rejects.toMatchObject({
      code: 'validation_error',
      message: 'message: toolCalls.0.callId is already used by another call',
    });
    const old = await reuse('call-1');
    expect(old.toolCalls).toEqual([{ callId: 'call-1', name: 'search' }]);
  });
});

describe('call records of a held state', () => {
  it(`are cut to the store's last ${KEPT}, with their call sites, once ${RECORD_TRIM_EVERY} more came`, () => {
    const cache = new SessionCache({ sessions: 10, bytes: 64 * 2 ** 20, callIdsKept: KEPT });
    const state = (count: number) => ({
      meta: { sessionId: 's', tenant: TENANT } as never,
      log: [],
      queue: [],
      calls: Array.from({ length: count }, (_, i) => ({
        callId: `call-${i}`,
        name: 'search',
        stepIndex: i,
        status: 'executed' as const,
      })),
      sites: [
        'call-0|tool:search',
        `call-${count - 1}|tool:search`,
        `call-${count - 1}|hook:feed`,
        'hook-only|hook:feed',
      ],
      itemSeq: 0,
      requestIds: [],
      version: String(count),
    });
    const under = KEPT + RECORD_TRIM_EVERY;
    cache.hold('s', state(under));
    expect(cache.get('s')!.calls).toHaveLength(under);
    expect(cache.get('s')!.sites).toHaveLength(4);
    cache.hold('s', state(under + 1));
    const held = cache.get('s')!;
    expect(held.calls.map((c) => c.callId)).toEqual(
      Array.from({ length: KEPT }, (_, i) => `call-${under + 1 - KEPT + i}`),
    );
    expect(held.sites).toEqual([`call-${under}|tool:search`, `call-${under}|hook:feed`, 'hook-only|hook:feed']);
  });

  it('follow the calls of a held session written through the store, at most the bound past the kept', async () => {
    const store = new CachingSessionStore(new MemorySessionStore({ callIdsKept: KEPT }), { callIdsKept: KEPT });
    const sessionId = 'ses_held';
    await store.createSession(
      {
        sessionId,
        tenant: TENANT,
        createdAt: new Date(0).toISOString(),
        thread: { live: [] },
        forceRefresh: false,
        steps: 0,
      },
      [],
      [],
      [],
    );
    for (let i = 1; i <= RECORDS + 1; i++) {
      await store.putCall(sessionId, { callId: `call-${i}`, name: 'search', stepIndex: i, status: 'executed' });
    }
    const held = store.held(sessionId)!;
    expect(held.calls.length).toBeLessThanOrEqual(KEPT + RECORD_TRIM_EVERY);
    expect(held.calls.at(-1)!.callId).toBe(`call-${RECORDS + 1}`);
    expect(held.calls.map((c) => c.callId)).toEqual(
      Array.from({ length: held.calls.length }, (_, i) => `call-${RECORDS + 2 - held.calls.length + i}`),
    );
  });
});
