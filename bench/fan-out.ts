/**
 * S7 fan-out on Redis: what one ticket update costs step-context as the number of
 * sessions subscribed to its ticket grows, and what a step's read costs as the
 * number of a session's subscriptions grows. Both run on a private redis-server
 * started for the row (nothing else on it: its CPU figures are this row's alone).
 *
 * - update: one record per `StepContextService.handle` call (a webhook at a
 *   time), on RedisFeedStreams + RedisSubscriptionStore as main.ts wires them
 *   (with a retention), at 1, 100, 1,000 and 10,000 sessions
 *   subscribed to the update's ticket. Cost = CPU of this process
 *   (process.cpuUsage) + CPU of the Redis main thread (INFO cpu), per update.
 *   Goal: cost at 10,000 <= 20x cost at 1.
 * - read: `FeedStepContext.fetch` of a session with 1, 10 and 100 subscriptions
 *   (one ticket each, every ticket with updates), its cursor at the last batch
 *   but one new update: the step reads that one. Same cost. Goal: at 100 <= 3x at 1.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import type { IncomingRecord } from '@ctxflow/bus';
import { type Cursor, DEFAULT_TENANT, type TicketUpdate, TOPICS, ticketKey } from '@ctxflow/contracts';
import { FeedStepContext, RedisFeedStreams, StepContextService } from '@ctxflow/step-context';
import { RedisSubscriptionStore, type Subscription } from '@ctxflow/subscriptions';
import { Redis } from 'ioredis';
import { progress } from './lib/progress.ts';
import { meets, type ScenarioResult } from './lib/report.ts';
import { median, round, summarize } from './lib/stats.ts';

const SUBSCRIBERS = [1, 100, 1_000, 10_000] as const;
const SUBSCRIPTIONS = [1, 10, 100] as const;
const TTL_MS = 30 * 24 * 3_600_000;
const SUMMARY = 'Checkout fails for carts over 50 items: the payment step times out after 30 s under load.';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** A redis-server of its own (no persistence), on loopback; answers once it pings. */
async function privateRedis(): Promise<{ url: string; process: ChildProcess }> {
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning'],
    { stdio: 'ignore' },
  );
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => {}); // not up yet: the loop tries again
    try {
      await probe.connect();
      await probe.ping();
      await probe.quit();
      return { url, process: child };
    } catch {
      probe.disconnect();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  child.kill('SIGKILL');
  throw new Error('the private redis-server for S7 did not start (is redis-server on the PATH?)');
}

/** CPU ms of Redis's main thread so far. */
async function redisCpuMs(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? Number.NaN);
  return (field('used_cpu_user_main_thread') + field('used_cpu_sys_main_thread')) * 1000;
}

function cpuMs(since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
}

/** CPU ms of this process and of Redis spent in `run`, divided by `per`. */
async function measure(redis: Redis, per: number, run: () => Promise<void>) {
  const redisBefore = await redisCpuMs(redis);
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  await run();
  const wallMs = performance.now() - started;
  const processMs = cpuMs(cpuBefore);
  const redisMs = (await redisCpuMs(redis)) - redisBefore;
  return {
    processMs: processMs / per,
    redisMs: redisMs / per,
    costMs: (processMs + redisMs) / per,
    wallMs: wallMs / per,
  };
}

function update(ticket: string, n: number): TicketUpdate {
  const eventId = `evt-${ticket}-${n}`;
  return {
    id: `github:${eventId}`,
    source: 'github',
    ticket,
    scope: 'octo/app',
    eventId,
    kind: 'commented',
    summary: `${SUMMARY} (${n})`,
    version: n,
    occurredAt: new Date(Date.UTC(2026, 0, 1, 10, 0, n)).toISOString(),
    receivedAt: new Date(Date.UTC(2026, 0, 1, 10, 0, n)).toISOString(),
  };
}

class Offsets {
  #next = 0;
  record(u: TicketUpdate): IncomingRecord {
    return {
      topic: TOPICS.ticketUpdates,
      partition: 0,
      offset: String(this.#next++),
      key: ticketKey(u),
      value: JSON.stringify(u),
      headers: {},
    };
  }
}

function stores(redis: Redis, prefix: string) {
  const subscriptions = new RedisSubscriptionStore({ redis, prefix, ttlMs: TTL_MS });
  const feedStreams = new RedisFeedStreams({ redis, prefix, ttlMs: TTL_MS });
  const idle = { subscribe: async () => ({ ready: async () => {}, close: async () => {} }) };
  const service = new StepContextService({
    subscriber: idle as never,
    subscriptions,
    feedStreams,
    topic: TOPICS.ticketUpdates,
  });
  return { subscriptions, feedStreams, service, feed: new FeedStepContext({ feedStreams, subscriptions }) };
}

async function subscribeAll(
  subscriptions: RedisSubscriptionStore,
  pairs: readonly { sessionId: string; subscription: Subscription }[],
): Promise<void> {
  for (let i = 0; i < pairs.length; i += 500) {
    await Promise.all(
      pairs
        .slice(i, i + 500)
        .map(({ sessionId, subscription }) => subscriptions.subscribe(DEFAULT_TENANT, sessionId, subscription)),
    );
  }
}

interface Point {
  processMs: number;
  redisMs: number;
  costMs: number;
  wallMs: number;
}

async function updateCost(redis: Redis, subscribers: number, updates: number): Promise<Point> {
  await redis.flushall();
  const { subscriptions, service } = stores(redis, 'bench-s7');
  const ticket = 'octo/app#1';
  await subscribeAll(
    subscriptions,
    Array.from({ length: subscribers }, (_, i) => ({
      sessionId: `s7-session-${i}`,
      subscription: { source: 'github', ticket },
    })),
  );
  const offsets = new Offsets();
  let n = 0;
  for (let i = 0; i < 3; i++) await service.handle([offsets.record(update(ticket, ++n))]); // warm-up
  return measure(redis, updates, async () => {
    for (let i = 0; i < updates; i++) await service.handle([offsets.record(update(ticket, ++n))]);
  });
}

async function readCost(redis: Redis, subscribed: number, reads: number): Promise<Point> {
  await redis.flushall();
  const { subscriptions, service, feed } = stores(redis, 'bench-s7');
  const sessionId = 's7-reader';
  const tickets = Array.from({ length: subscribed }, (_, i) => `octo/app#${i + 1}`);
  await subscribeAll(
    subscriptions,
    tickets.map((ticket) => ({ sessionId, subscription: { source: 'github', ticket } })),
  );
  const offsets = new Offsets();
  // Every ticket has had updates; the session read them all (its cursor), then one more came.
  for (let n = 1; n <= 3; n++) {
    for (const ticket of tickets) await service.handle([offsets.record(update(ticket, n))]);
  }
  const request = (cursor: Cursor | undefined) => ({
    sessionId,
    cursor,
    maxBytes: 1 << 20,
    signal: new AbortController().signal,
  });
  let cursor: Cursor | undefined;
  for (;;) {
    const batch = await feed.fetch(request(cursor));
    if (!batch) break;
    cursor = batch.cursor as Cursor;
  }
  await service.handle([offsets.record(update(tickets[0]!, 4))]);
  for (let i = 0; i < 5; i++) await feed.fetch(request(cursor)); // warm-up
  const check = await feed.fetch(request(cursor));
  if (check?.items.length !== 1) throw new Error(`S7 read: expected the one new update, got ${check?.items.length}`);
  return measure(redis, reads, async () => {
    for (let i = 0; i < reads; i++) await feed.fetch(request(cursor));
  });
}

const pick = (points: Point[]): Point => ({
  processMs: round(median(points.map((p) => p.processMs))),
  redisMs: round(median(points.map((p) => p.redisMs))),
  costMs: round(median(points.map((p) => p.costMs))),
  wallMs: round(median(points.map((p) => p.wallMs))),
});

export async function runFanOut(options: {
  trials: number;
  updates: number;
  reads: number;
}): Promise<ScenarioResult[]> {
  const server = await privateRedis();
  const redis = new Redis(server.url, { maxRetriesPerRequest: 3 });
  const updateCurve = new Map<number, Point[]>(SUBSCRIBERS.map((n) => [n, []]));
  const readCurve = new Map<number, Point[]>(SUBSCRIPTIONS.map((n) => [n, []]));
  const updateRatios: number[] = [];
  const readRatios: number[] = [];
  try {
    for (let trial = 0; trial < options.trials; trial++) {
      const byCount = new Map<number, Point>();
      for (const n of SUBSCRIBERS) {
        const point = await updateCost(redis, n, options.updates);
        byCount.set(n, point);
        updateCurve.get(n)!.push(point);
        progress(
          `S7 trial ${trial + 1}: update at ${n} subscribers: ${point.costMs.toFixed(3)} ms (process ${point.processMs.toFixed(3)}, redis ${point.redisMs.toFixed(3)})`,
        );
      }
      updateRatios.push(byCount.get(10_000)!.costMs / byCount.get(1)!.costMs);
      const reads = new Map<number, Point>();
      for (const n of SUBSCRIPTIONS) {
        const point = await readCost(redis, n, options.reads);
        reads.set(n, point);
        readCurve.get(n)!.push(point);
        progress(
          `S7 trial ${trial + 1}: read with ${n} subscriptions: ${point.costMs.toFixed(3)} ms (process ${point.processMs.toFixed(3)}, redis ${point.redisMs.toFixed(3)})`,
        );
      }
      readRatios.push(reads.get(100)!.costMs / reads.get(1)!.costMs);
    }
  } finally {
    await redis.quit();
    server.process.kill('SIGTERM');
  }
  const rows: [string, string, string, number, number[], Map<number, Point[]>, string][] = [
    [
      'S7-update',
      'one ticket update at 1 to 10,000 subscribers',
      'CPU ms per update (this process + Redis main thread) at 10,000 subscribers / at 1',
      20,
      updateRatios,
      updateCurve,
      'subscribers',
    ],
    [
      'S7-read',
      "a step's read with 1 to 100 subscriptions",
      'CPU ms per FeedStepContext.fetch (this process + Redis main thread) at 100 subscriptions / at 1',
      3,
      readRatios,
      readCurve,
      'subscriptions',
    ],
  ];
  return rows.map(([id, title, ratioOf, value, ratios, curve, axis]) => {
    const ratio = summarize(ratios);
    const goal = { op: '<=' as const, value };
    const points: Record<string, number>[] = [...curve].map(([n, trials]) => ({ [axis]: n, ...pick(trials) }));
    const figures: Record<string, number | string> = {};
    for (const p of points) figures[`cost ms at ${p[axis]}`] = p.costMs!;
    return {
      id,
      title,
      ratioOf,
      goal,
      ratio: { ...ratio, median: round(ratio.median), min: round(ratio.min), max: round(ratio.max) },
      met: meets(goal, ratio.median),
      cpuMsPer1k: {},
      figures,
      curve: points,
      notes: [
        'a private redis-server; cost = process.cpuUsage of the applying/reading process + INFO cpu of the Redis main thread',
        `medians over trials; ${id === 'S7-update' ? `${options.updates} updates` : `${options.reads} reads`} per point`,
      ],
    };
  });
}
