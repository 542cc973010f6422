/**
 * Fault: kill -9 of the step-context consumer in the middle of a stream of
 * 2,000 ticket updates, twice, each time restarted. Every update must land
 * exactly once in every subscribed session's feed stream, in ticket order:
 * the consumed offset is stored in the same Lua write as the entries, and a
 * restarted consumer resumes from Redis, not from Kafka's committed offsets.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { requireKafka, requireRedis } from '../support/services.ts';
import { ExactlyOnce } from './exactly-once.ts';
import { cleanupsAfterAll } from './load-rig.ts';
import {
  deletePrefix,
  ENTRIES,
  freePort,
  SESSION_TIMEOUT_MS,
  ServiceProcess,
  serviceEnv,
  startGroupsAtEnd,
  waitFor,
} from './processes.ts';
import { TicketLoad } from './ticket-load.ts';

const UPDATES = 2_000;

describe('fault: kill -9 of the step-context consumer mid-stream', () => {
  const cleanups = cleanupsAfterAll();

  it('2,000 updates, two kill -9 and restarts: every update lands once per subscribed session, in ticket order', async () => {
    const brokers = requireKafka();
    const redisUrl = requireRedis();
    const run = `f1-${randomUUID().slice(0, 8)}`;
    const prefix = `fault:${run}`;
    const groupId = `fault-step-context-${run}`;
    const redis = new Redis(redisUrl);
    redis.on('error', () => {});
    cleanups.push(async () => {
      await deletePrefix(redis, prefix);
      redis.disconnect();
    });

    const checker = new ExactlyOnce('step-context kill -9 mid-stream');
    const sessions = Array.from({ length: 8 }, (_, i) => `${run}-s${i}`);
    const load = new TicketLoad({ run, sessions, tickets: 16, fanout: 2, redis, prefix, brokers, checker });
    cleanups.push(() => load.close());
    await load.subscribe();
    await startGroupsAtEnd(brokers, [{ groupId, topic: 'ctxflow.ticket-updates.v1' }]);

    const port = await freePort();
    const service = new ServiceProcess({
      name: 'step-context',
      entry: ENTRIES.stepContext,
      port,
      env: serviceEnv({
        KAFKA_BROKERS: brokers.join(','),
        REDIS_URL: redisUrl,
        CTXFLOW_REDIS_PREFIX: prefix,
        CTXFLOW_STEP_CONTEXT_PORT: String(port),
        CTXFLOW_STEP_CONTEXT_GROUP: groupId,
        KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
        CTXFLOW_LOG_LEVEL: 'warn',
      }),
    });
    await service.start();

    const total = UPDATES * 2; // fan-out 2: one entry per update and follower
    const started = Date.now();
    // About 100 updates a second, so both kills fall inside the stream.
    const publishing = load.publish(UPDATES, { perChunk: 20, everyMs: 200 });
    const killedAt: number[] = [];
    for (const fraction of [0.2, 0.65]) {
      const landed = await waitFor(
        `${fraction * 100}% of the entries`,
        async () => {
          const n = await load.landedEntries();
          return n >= total * fraction ? n : undefined;
        },
        60_000,
        10,
      );
      await service.kill9();
      checker.fault(`kill -9 step-context after ${landed}/${total} entries`);
      killedAt.push(landed);
      await service.start();
    }
    await publishing;
    await waitFor('every entry', async () => (await load.landedEntries()) >= total, 60_000, 100);
    // Anything doubled would arrive late: give a redelivery time to show.
    await new Promise((r) => setTimeout(r, 1_000));

    const report = checker.check(await load.landed());
    process.stdout.write(
      `[exactly-once] kills at ${killedAt.join(', ')} of ${total} entries; ${Date.now() - started} ms from first publish\n`,
    );
    expect(report.inputs).toBe(total);
    expect(report.faults).toBe(2);
    for (const n of killedAt) {
      expect(n).toBeGreaterThan(0);
      expect(n).toBeLessThan(total); // the kill fell inside the stream
    }
    expect(await load.landedEntries()).toBe(total);
    await service.stop();
  }, 90_000);
});
