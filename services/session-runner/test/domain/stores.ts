/**
 * The session stores the engine's tests run on: in memory, and on Redis under a key prefix of
 * their own (one client per test file; its keys are deleted and the client closed after it).
 */
import { randomUUID } from 'node:crypto';
import { MemorySessionStore, RedisSessionStore, type SessionStore } from '@ctxflow/session-runner';
import { Redis } from 'ioredis';
import { afterAll } from 'vitest';
import { requireRedis } from '../../../../test/support/services.ts';

/** `[name, new store]` for describe.each; `label` names the Redis keys' prefix (`ctxtest-<label>-...`). */
export function engineStores(label: string): [string, () => SessionStore][] {
  let redis: Redis | undefined;
  const prefixes: string[] = [];
  afterAll(async () => {
    if (redis === undefined) return;
    for (const prefix of prefixes) {
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length > 0) await redis.del(...keys);
    }
    redis.disconnect();
  });
  return [
    ['memory', () => new MemorySessionStore()],
    [
      'Redis',
      () => {
        redis ??= new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
        const prefix = `ctxtest-${label}-${randomUUID().slice(0, 8)}`;
        prefixes.push(prefix);
        return new RedisSessionStore(redis, { prefix });
      },
    ],
  ];
}
