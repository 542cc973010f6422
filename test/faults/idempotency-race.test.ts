/**
 * Fault: 50 concurrent `POST /context` requests racing on one idempotency key
 * (R13). With the same items exactly one answers `recorded: n` and the other
 * 49 `recorded: 0`; with different items exactly one wins and the other 49
 * answer 409 `state_context_key_conflict`. Either way the queue holds the
 * winner's items once and nothing of a loser. Run against a session-runner
 * process on Redis (a unique key prefix on the shared server) and in-process
 * on the memory store, both over real HTTP connections.
 */
import { randomUUID } from 'node:crypto';
import { MemorySessionStore } from '@ctxflow/session-runner';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createHarness } from '../support/harness.ts';
import { requireRedis } from '../support/services.ts';
import { ExactlyOnce } from './exactly-once.ts';
import { cleanupsAfterAll } from './load-rig.ts';
import { deletePrefix, ENTRIES, freePort, ServiceProcess, serviceEnv } from './processes.ts';

const RACERS = 50;
/** Keys raced per kind (same items, different items) and store. */
const KEYS = 4;
const ITEM = /^item (\S+)$/;

interface Answer {
  status: number;
  body: { recorded?: number; error?: { code: string; retryable: boolean } };
}

async function post(url: string, body: unknown): Promise<Answer> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Answer['body'] };
}

/**
 * Races `RACERS` requests per key on one session of the runner at `baseUrl`,
 * half the keys with identical items, half with items that differ per racer,
 * and checks the answers and the queue.
 */
async function race(baseUrl: string, name: string): Promise<void> {
  const run = randomUUID().slice(0, 8);
  const checker = new ExactlyOnce(`idempotency race (${name})`);
  const created = await post(`${baseUrl}/sessions`, {});
  expect(created.status).toBe(201);
  const sessionId = (created.body as unknown as { sessionId: string }).sessionId;
  const stream = `${sessionId}|queue`;

  for (let k = 0; k < KEYS; k++) {
    // Same items: two per request, so a half-applied winner would show.
    const key = `${run}-same-${k}`;
    const items = [
      { kind: 'notice', content: `item ${key}-a` },
      { kind: 'notice', content: `item ${key}-b` },
    ];
    checker.sent(stream, `${key}-a`);
    checker.sent(stream, `${key}-b`);
    const answers = await Promise.all(
      Array.from({ length: RACERS }, () => post(`${baseUrl}/context`, { sessionId, key, items })),
    );
    checker.fault(`${RACERS} concurrent POST /context on key ${key}, same items`);
    const tally = answers.map((a) => `${a.status} ${JSON.stringify(a.body)}`).sort();
    expect(tally).toEqual([...Array.from({ length: RACERS - 1 }, () => '200 {"recorded":0}'), '200 {"recorded":2}']);
  }

  for (let k = 0; k < KEYS; k++) {
    const key = `${run}-diff-${k}`;
    const itemsOf = (i: number) => [
      { kind: 'notice', content: `item ${key}-r${i}-a` },
      { kind: 'notice', content: `item ${key}-r${i}-b` },
    ];
    const answers = await Promise.all(
      Array.from({ length: RACERS }, (_, i) => post(`${baseUrl}/context`, { sessionId, key, items: itemsOf(i) })),
    );
    checker.fault(`${RACERS} concurrent POST /context on key ${key}, different items`);
    const winners = answers.flatMap((a, i) => (a.status === 200 ? [i] : []));
    expect(winners).toHaveLength(1);
    expect(answers[winners[0]!]!.body).toEqual({ recorded: 2 });
    const losers = answers.filter((a) => a.status !== 200);
    expect(losers).toHaveLength(RACERS - 1);
    for (const loser of losers) {
      expect(loser.status).toBe(409);
      expect(loser.body.error).toMatchObject({ code: 'state_context_key_conflict', retryable: false });
    }
    // Only the winner's items are expected; a loser's item in the queue is reported as unexpected.
    checker.sent(stream, `${key}-r${winners[0]}-a`);
    checker.sent(stream, `${key}-r${winners[0]}-b`);
  }

  const inspected = await fetch(`${baseUrl}/sessions/${sessionId}/inspect`);
  expect(inspected.status).toBe(200);
  const state = (await inspected.json()) as { queue: { item: { kind: string; content?: string } }[] };
  const queued = state.queue.map((q) => ITEM.exec(q.item.content ?? '')?.[1] ?? JSON.stringify(q.item));
  const report = checker.check(new Map([[stream, queued]]));
  expect(report.faults).toBe(KEYS * 2);
  expect(report.inputs).toBe(KEYS * 2 * 2);
  expect(queued).toHaveLength(KEYS * 2 * 2);
}

describe('fault: 50 concurrent requests racing on one idempotency key', () => {
  const cleanups = cleanupsAfterAll();

  it('on the Redis store (a session-runner process): one winner per key, the queue holds its items once', async () => {
    const redisUrl = requireRedis();
    const prefix = `fault:race-${randomUUID().slice(0, 8)}`;
    const redis = new Redis(redisUrl);
    cleanups.push(async () => {
      await deletePrefix(redis, prefix);
      redis.disconnect();
    });
    const port = await freePort();
    const runner = new ServiceProcess({
      name: 'session-runner',
      entry: ENTRIES.runner,
      port,
      env: serviceEnv({
        CTXFLOW_PORT: String(port),
        REDIS_URL: redisUrl,
        CTXFLOW_REDIS_PREFIX: prefix,
        CTXFLOW_LOG_LEVEL: 'error',
      }),
    });
    cleanups.push(() => runner.stop());
    await runner.start();
    await race(`http://127.0.0.1:${port}`, 'Redis store');
  }, 90_000);

  it('on the memory store (in-process, over HTTP): one winner per key, the queue holds its items once', async () => {
    const harness = await createHarness({ store: new MemorySessionStore() });
    cleanups.push(() => harness.app.close());
    const address = await harness.app.listen({ host: '127.0.0.1', port: 0 });
    await race(address, 'memory store');
  }, 60_000);
});
