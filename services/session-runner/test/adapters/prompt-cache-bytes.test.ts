/**
 * The Redis session store keeps system prompts in two caches (text -> id, id -> text), the
 * key or value being the whole prompt text: bounded by estimated bytes, not only by count,
 * so a thousand long prompts cannot take the session-runner's heap. A prompt that left the
 * cache (or never fit) is read back from Redis.
 */
import { randomUUID } from 'node:crypto';
import type { SessionMeta, StepRecord } from '@ctxflow/session-runner';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { requireRedis } from '../../../../test/support/services.ts';
import {
  DEFAULT_PROMPT_CACHE_BYTES,
  promptEntryBytes,
  RedisSessionStore,
} from '../../src/adapters/redis-session-store.ts';

const redis = new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
const prefix = `ctxtest-prompts-${randomUUID().slice(0, 8)}`;

afterAll(async () => {
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

const AT = '2026-01-01T00:00:00.000Z';

function meta(): SessionMeta {
  return {
    sessionId: `ses_${randomUUID()}`,
    tenant: 'tenant-a',
    createdAt: AT,
    thread: { live: [{ content: 'Ticket 42' }] },
    forceRefresh: false,
    steps: 1,
  };
}

function step(system: string): StepRecord {
  return {
    stepId: `stp_${randomUUID()}`,
    ordinal: 1,
    mode: 'first',
    runId: 'run_1',
    logStart: 0,
    logEnd: 0,
    rowIds: [],
    system,
    activeTools: ['search'],
    cache: { rebuilt: true, reason: 'new_thread' },
    at: AT,
  };
}

/** A distinct prompt of `chars` characters. */
const prompt = (n: number, chars: number) => `${n}:`.padEnd(chars, 'p');

/** A session whose one step record names `system`; returns its id. */
async function sessionWith(store: RedisSessionStore, system: string): Promise<string> {
  const m = meta();
  await store.createSession(m, [], [step(system)], []);
  return m.sessionId;
}

describe('Redis session store: prompt caches bounded by bytes', () => {
  it('ten 200,000-character prompts stay within a 1 MiB bound; every step still reads its own prompt', async () => {
    const bound = 1024 * 1024;
    const store = new RedisSessionStore(redis, { prefix, promptCacheBytes: bound });
    const prompts = Array.from({ length: 10 }, (_, i) => prompt(i, 200_000));
    const sessions: string[] = [];
    for (const text of prompts) sessions.push(await sessionWith(store, text));
    // Without the byte bound (count only), the ten would be held: about 4 MB each way.
    const held = store.promptCacheBytes;
    expect(held.ids).toBeLessThanOrEqual(bound);
    expect(held.texts).toBeLessThanOrEqual(bound);
    // Two fit (400,086 bytes each), the third would not.
    expect(held.ids).toBe(2 * promptEntryBytes(prompts[0]!, 'x'.repeat(22)));
    for (const [i, sessionId] of sessions.entries()) {
      const [record] = await store.listSteps(sessionId);
      expect(record!.system).toBe(prompts[i]);
    }
    expect(store.promptCacheBytes.texts).toBeLessThanOrEqual(bound);
  });

  it('a prompt bigger than the bound is not cached, and still read back', async () => {
    const store = new RedisSessionStore(redis, { prefix, promptCacheBytes: 64 * 1024 });
    const big = prompt(99, 100_000);
    const sessionId = await sessionWith(store, big);
    expect(store.promptCacheBytes).toEqual({ ids: 0, texts: 0 });
    const [record] = await store.listSteps(sessionId);
    expect(record!.system).toBe(big);
    expect(store.promptCacheBytes).toEqual({ ids: 0, texts: 0 });
  });

  it(`the default bound is ${DEFAULT_PROMPT_CACHE_BYTES} bytes per cache`, async () => {
    const store = new RedisSessionStore(redis, { prefix });
    // Three prompts of 3,000,000 characters: about 6 MB each, 18 MB together.
    const prompts = Array.from({ length: 3 }, (_, i) => prompt(i, 3_000_000));
    const sessions: string[] = [];
    for (const text of prompts) sessions.push(await sessionWith(store, text));
    const one = promptEntryBytes(prompts[0]!, 'x'.repeat(22));
    expect(store.promptCacheBytes).toEqual({ ids: 2 * one, texts: 2 * one });
    expect(3 * one).toBeGreaterThan(DEFAULT_PROMPT_CACHE_BYTES);
    const [first] = await store.listSteps(sessions[0]!);
    expect(first!.system).toBe(prompts[0]);
  });
});
