/**
 * Fault: a step-context consumer paused past its session timeout (SIGSTOP) in
 * the middle of a batch, a second instance takes its partitions after the
 * rebalance and applies the rest from the offsets stored in Redis, then the
 * first is resumed (SIGCONT) and finishes its stale in-flight batch: those late
 * writes must be refused by the Lua offset check, nothing applied twice.
 *
 * Seen from outside: Redis MONITOR (a private Redis) shows every apply attempt
 * with its `<topic>:<partition>` and offset, so a late write is an attempt at a
 * position already applied; the services' `ticket update applied` log lines
 * show which instance applied what.
 */
import { randomUUID } from 'node:crypto';
import { type TicketUpdate, TOPICS } from '@ctxflow/contracts';
import { RedisFeedStreams } from '@ctxflow/step-context';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { monitorRedis } from '../support/redis-monitor.ts';
import { requireKafka } from '../support/services.ts';
import { ExactlyOnce } from './exactly-once.ts';
import { cleanupsAfterAll } from './load-rig.ts';
import {
  ENTRIES,
  freePort,
  type LogLine,
  PrivateRedis,
  SESSION_TIMEOUT_MS,
  ServiceProcess,
  serviceEnv,
  sleep,
  startGroupsAtEnd,
  waitFor,
} from './processes.ts';
import { TicketLoad } from './ticket-load.ts';

const FIRST = 2_000;
const SECOND = 200;

interface Applied {
  instance: string;
  partition: number;
  offset: string;
  updateId: string;
  at: number;
}

describe('fault: a step-context consumer paused past its session timeout, then resumed', () => {
  const cleanups = cleanupsAfterAll();

  it('SIGSTOP mid-batch, a second instance takes over, SIGCONT: the late writes are refused, every update applied once', async () => {
    const brokers = requireKafka();
    const run = `f3-${randomUUID().slice(0, 8)}`;
    const prefix = `fault:${run}`;
    const groupId = `fault-step-context-${run}`;
    const redisServer = await PrivateRedis.start({ aof: false });
    cleanups.push(() => redisServer.stop());
    const redis = new Redis(redisServer.url);
    redis.on('error', () => {});
    cleanups.push(async () => redis.disconnect());

    // Load the apply script once, so no service call starts with NOSCRIPT (which MONITOR would show twice).
    await new RedisFeedStreams({ redis, prefix: `${prefix}:warmup` }).append({
      id: 'generic:warmup',
      source: 'generic',
      ticket: 'warmup',
      eventId: 'warmup',
      kind: 'updated',
      summary: 'warmup',
      occurredAt: new Date().toISOString(),
      receivedAt: new Date().toISOString(),
    } satisfies TicketUpdate);

    // Every apply attempt of every record: apply-updates.lua's packed argument names the partition's
    // offsets field `<topic>:<partition>` and each record's offset.
    const attempts = new Map<string, number>();
    /** Position -> Redis time (ms) of its first apply attempt. */
    const firstAttempt = new Map<string, number>();
    const monitor = await monitorRedis(redisServer.url);
    cleanups.push(async () => monitor.disconnect());
    const field = new RegExp(`^${TOPICS.ticketUpdates.replace(/\./g, '\\.')}:\\d+$`);
    monitor.on('monitor', (time: string, args: string[], source: string) => {
      const command = args[0]?.toLowerCase();
      if (source === 'lua' || (command !== 'evalsha' && command !== 'eval')) return;
      // apply-updates.lua's packed argument: `"field":"<topic>:<partition>"`, then `"records":[...]` with each
      // record's `"offset":"<n>"` (record-offset.lua's has no records: not an apply). Read by pattern: MONITOR
      // escapes the quotes of a JSON argument, which ioredis does not fully undo.
      const text = args.slice(1).join('" "');
      const named = /"field":"([^"\\]+)"/.exec(text)?.[1];
      if (named === undefined || !field.test(named) || !text.includes('"records":[')) return;
      for (const [, offset] of text.matchAll(/"offset":"(\d+)"/g)) {
        const position = `${named}@${offset}`;
        attempts.set(position, (attempts.get(position) ?? 0) + 1);
        if (!firstAttempt.has(position)) firstAttempt.set(position, Number(time) * 1_000);
      }
    });

    const checker = new ExactlyOnce('step-context paused past its session timeout');
    const sessions = Array.from({ length: 6 }, (_, i) => `${run}-s${i}`);
    const load = new TicketLoad({ run, sessions, tickets: 24, fanout: 2, redis, prefix, brokers, checker });
    cleanups.push(() => load.close());
    await load.subscribe();
    await startGroupsAtEnd(brokers, [{ groupId, topic: TOPICS.ticketUpdates }]);

    const instance = async (name: string) => {
      const port = await freePort();
      const service = new ServiceProcess({
        name,
        entry: ENTRIES.stepContext,
        port,
        env: serviceEnv({
          KAFKA_BROKERS: brokers.join(','),
          REDIS_URL: redisServer.url,
          CTXFLOW_REDIS_PREFIX: prefix,
          CTXFLOW_STEP_CONTEXT_PORT: String(port),
          CTXFLOW_STEP_CONTEXT_GROUP: groupId,
          KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
          CTXFLOW_LOG_LEVEL: 'info',
        }),
      });
      await service.start();
      return service;
    };
    const a = await instance('step-context-a');

    // All at once: big fetches, so the pause falls inside a batch being applied.
    await load.publish(FIRST, { perChunk: 250, everyMs: 0 });
    const total = FIRST * 2;
    const atPause = await waitFor(
      'a quarter of the entries',
      async () => {
        const n = await load.landedEntries();
        return n >= total / 4 ? n : undefined;
      },
      60_000,
      5,
    );
    a.pause();
    const pausedAt = Date.now();
    checker.fault(`SIGSTOP step-context-a after ${atPause}/${total} entries`);

    const b = await instance('step-context-b'); // joins once a's session timed out
    await waitFor('every entry of the first stream', async () => (await load.landedEntries()) >= total, 60_000, 50);
    const pausedFor = Date.now() - pausedAt;
    const attemptsBeforeResume = sum(attempts);
    a.resume();
    const resumedAt = Date.now();
    checker.fault(`SIGCONT step-context-a after ${pausedFor} ms`);

    // a finishes its stale batch (refused), learns of the rebalance and rejoins; both then share the topic.
    await sleep(3 * 1_000);
    await load.publish(SECOND, { perChunk: 20, everyMs: 50 });
    await waitFor('every entry', async () => (await load.landedEntries()) >= (FIRST + SECOND) * 2, 60_000, 100);
    await sleep(1_000);

    const report = checker.check(await load.landed());
    const applied = [...appliedOf(a, run), ...appliedOf(b, run)];
    const lateWrites = [...attempts.values()].reduce((n, count) => n + count - 1, 0);
    const byA = applied.filter((x) => x.instance === a.name);
    const byB = applied.filter((x) => x.instance === b.name);
    const firstIds = new Set(
      Array.from({ length: FIRST }, (_, n) => `generic:${run}-u${n}`), // TicketLoad's ids of the first stream
    );
    process.stdout.write(
      `[exactly-once] paused ${pausedFor} ms at ${atPause}/${total} entries; a applied ${byA.length}, b applied ${byB.length}; ` +
        `${attemptsBeforeResume} apply attempts before SIGCONT, ${lateWrites} refused late write(s)\n`,
    );

    expect(report.inputs).toBe((FIRST + SECOND) * 2);
    expect(pausedFor).toBeGreaterThan(SESSION_TIMEOUT_MS);
    // Each update applied by exactly one instance, once (an applied log line is a write that passed the offset check).
    expect(duplicates(applied.map((x) => x.updateId))).toEqual([]);
    expect(duplicates(applied.map((x) => `${x.partition}@${x.offset}`))).toEqual([]);
    expect(applied.length).toBe(FIRST + SECOND);
    // Both instances did part of the first stream: a before its pause, b after taking over.
    expect(byA.some((x) => firstIds.has(x.updateId) && x.at < pausedAt)).toBe(true);
    expect(byB.some((x) => firstIds.has(x.updateId))).toBe(true);
    // After SIGCONT, a applied nothing of the first stream: its stale feedStreams were refused. (Lines
    // logged after SIGCONT may report the writes a had sent before SIGSTOP, one run of up to 200
    // records per partition it was handling, which Redis ran in turn, possibly after the pause
    // began: each of them reached Redis before any write of b for that partition.)
    const lateApplied = byA.filter((x) => firstIds.has(x.updateId) && x.at >= resumedAt);
    const firstOfB = new Map<number, number>();
    for (const x of byB) {
      const at = firstAttempt.get(`${TOPICS.ticketUpdates}:${x.partition}@${x.offset}`) ?? Number.POSITIVE_INFINITY;
      firstOfB.set(x.partition, Math.min(firstOfB.get(x.partition) ?? Number.POSITIVE_INFINITY, at));
    }
    for (const x of lateApplied) {
      expect(firstAttempt.get(`${TOPICS.ticketUpdates}:${x.partition}@${x.offset}`)).toBeLessThan(
        firstOfB.get(x.partition) ?? Number.POSITIVE_INFINITY,
      );
    }
    // Whether a still holds a fetched run when it wakes (and so tries a late write) depends on
    // where SIGSTOP caught it; every such write is refused by the offset check, which the
    // duplicate checks above would catch otherwise. The refusal itself is proven
    // deterministically by the feed streams contract ("applyRun applies a run in record order,
    // records the last offset, and skips what was consumed").

    await Promise.all([a.stop(), b.stop()]);
  }, 90_000);
});

function sum(map: Map<string, number>): number {
  let n = 0;
  for (const v of map.values()) n += v;
  return n;
}

function duplicates(values: string[]): string[] {
  const seen = new Set<string>();
  return values.filter((v) => {
    if (seen.has(v)) return true;
    seen.add(v);
    return false;
  });
}

/** This run's `ticket update applied` lines of one instance (every incarnation). */
function appliedOf(service: ServiceProcess, run: string): Applied[] {
  return service.logs
    .filter((line: LogLine) => line.msg === 'ticket update applied')
    .filter((line) => String(line.updateId).startsWith(`generic:${run}-`))
    .map((line) => ({
      instance: service.name,
      partition: Number(line.partition),
      offset: String(line.offset),
      updateId: String(line.updateId),
      at: Number(line.time),
    }));
}
