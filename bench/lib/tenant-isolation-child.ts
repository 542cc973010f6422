/**
 * The server of S10 (tenant-isolation.ts): the session-runner app with two tenants' API keys
 * and the per-tenant rate limit counted in Redis, as the runner's main wires it. Listens on
 * 127.0.0.1:0. Environment: REDIS_URL, BENCH_PER_MINUTE, BENCH_KEY_A, BENCH_KEY_B.
 * IPC: sends `{ type: 'listening', port }`; `{ type: 'cpu' }` answers `{ type: 'cpu', ms }`;
 * `{ type: 'stop' }` removes its Redis keys, closes and exits.
 */
import { randomUUID } from 'node:crypto';
import { createAuthenticator } from '@ctxflow/service-kit';
import { buildRunnerApp, createEngine, MemorySessionStore } from '@ctxflow/session-runner';
import { Redis } from 'ioredis';
import { cpuMs } from './cpu.ts';

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const redis = new Redis(env('REDIS_URL'));
const prefix = `bench-s10-${randomUUID().slice(0, 8)}`;
const app = buildRunnerApp({
  engine: createEngine({ store: new MemorySessionStore() }),
  authenticate: createAuthenticator(
    new Map([
      [env('BENCH_KEY_A'), 'flooding-tenant'],
      [env('BENCH_KEY_B'), 'other-tenant'],
    ]),
  ),
  limits: { rate: { perMinute: Number(env('BENCH_PER_MINUTE')), redis, prefix } },
});
await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
if (address === null || typeof address === 'string') throw new Error('no TCP address');

process.on('message', async (message: { type: string }) => {
  if (message.type === 'cpu') process.send?.({ type: 'cpu', ms: cpuMs() });
  if (message.type === 'stop') {
    await app.close();
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    process.exit(0);
  }
});
process.send?.({ type: 'listening', port: address.port });
