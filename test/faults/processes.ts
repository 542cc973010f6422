/**
 * Helpers of the fault tests: services as child processes (kill -9, SIGSTOP,
 * restart), private redis-server instances, Kafka group offsets, and waiting.
 * Every process started here is stopped by `stopAll()`.
 *
 * Longer than 400 lines: every fault test's process control (spawn, kill -9, SIGSTOP, private Redis, group offsets) shares one registry that stopAll() empties.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createBus } from '@ctxflow/bus';
import { TOPICS } from '@ctxflow/contracts';
import { Redis } from 'ioredis';
import { Kafka, logLevel } from 'kafkajs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export const ENTRIES = {
  runner: 'services/session-runner/src/main.ts',
  stepContext: 'services/step-context/src/main.ts',
  feedIngestor: 'services/feed-ingestor/src/main.ts',
} as const;

/** Session timeout of the services' consumer groups in the fault tests (the broker's minimum is 6000). */
export const SESSION_TIMEOUT_MS = 6_000;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A TCP port free on this host right now (the kernel picks it). */
export function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => done(port));
    });
  });
}

/** Polls `check` every `everyMs` until it returns a value other than undefined/false, or throws after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs: number,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    }
    await sleep(everyMs);
  }
}

/**
 * The environment of a service child: only what it needs, so nothing of the
 * test runner's own (REDIS_CLUSTER_NODES would win over REDIS_URL) leaks in.
 */
export function serviceEnv(vars: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', CTXFLOW_HOST: '127.0.0.1', ...vars };
}

/** One pino line of a service's stdout, parsed. */
export type LogLine = Record<string, unknown> & { msg?: string };

const running = new Set<ChildProcess>();

/**
 * A service as a child process on `process.execPath`, restartable. Its stdout
 * (pino JSON) is kept, parsed, per incarnation; stderr is kept for failure output.
 */
export class ServiceProcess {
  readonly name: string;
  readonly #entry: string;
  readonly #env: NodeJS.ProcessEnv;
  readonly #healthUrl: string;
  #child: ChildProcess | undefined;
  /** Log lines of every incarnation; `incarnation` counts from 1. */
  readonly logs: (LogLine & { incarnation: number })[] = [];
  readonly stderr: string[] = [];
  /** What the test did to it and when (start, healthy, kill -9, exit), for writeLog. */
  readonly #events: { time: number; incarnation: number; event: string }[] = [];
  incarnation = 0;

  constructor(options: { name: string; entry: string; env: NodeJS.ProcessEnv; port: number }) {
    this.name = options.name;
    this.#entry = options.entry;
    this.#env = options.env;
    this.#healthUrl = `http://127.0.0.1:${options.port}/healthz`;
  }

  get pid(): number {
    const pid = this.#child?.pid;
    if (pid === undefined || this.#child?.exitCode !== null) throw new Error(`${this.name} is not running`);
    return pid;
  }

  /** Starts an incarnation and waits until it answers /healthz (it listens only once its consumer joined). */
  async start(timeoutMs = 40_000): Promise<void> {
    this.incarnation += 1;
    const incarnation = this.incarnation;
    const child = spawn(process.execPath, [join(ROOT, this.#entry)], {
      cwd: ROOT,
      env: { ...this.#env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.#child = child;
    running.add(child);
    this.#event(incarnation, `started (pid ${child.pid})`);
    child.once('exit', (code, signal) => {
      running.delete(child);
      this.#event(incarnation, `exited (${signal ?? `code ${code}`})`);
    });
    let rest = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      const lines = (rest + chunk.toString('utf8')).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) {
        try {
          this.logs.push({ ...(JSON.parse(line) as LogLine), incarnation });
        } catch {
          this.stderr.push(line);
        }
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => {
      this.stderr.push(chunk.toString('utf8'));
      this.#event(incarnation, `stderr: ${chunk.toString('utf8').trimEnd()}`);
    });
    // A start that failed for good is not a slow start: an exit ends the wait at once.
    const outcome = await waitFor(
      `${this.name} #${incarnation} to answer /healthz`,
      async () => {
        if (child.exitCode !== null || child.signalCode !== null) return 'exited';
        return (await fetch(this.#healthUrl)).ok;
      },
      timeoutMs,
      100,
    ).catch((err: Error) => {
      throw new Error(`${err.message}\n${this.stderr.join('').slice(-2000)}`);
    });
    if (outcome === 'exited') {
      throw new Error(
        `${this.name} #${incarnation} exited with ${child.signalCode ?? child.exitCode}: ${this.stderr.join('').slice(-2000)}`,
      );
    }
    this.#event(incarnation, 'answered /healthz');
  }

  #event(incarnation: number, event: string): void {
    this.#events.push({ time: Date.now(), incarnation, event });
  }

  /**
   * Writes `<dir>/<name>.log`: every incarnation's log lines (pino JSON) and
   * stderr, with what the test did to it (`"test"` lines: started, answered
   * /healthz, kill -9, exited), in time order. Returns the file's path.
   */
  writeLog(dir: string): string {
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `${this.name}.log`);
    const lines = [
      ...this.logs.map((line) => ({ time: Number(line.time ?? 0), text: JSON.stringify(line) })),
      ...this.#events.map((e) => ({
        time: e.time,
        text: JSON.stringify({ time: e.time, incarnation: e.incarnation, test: e.event }),
      })),
    ].sort((a, b) => a.time - b.time);
    writeFileSync(file, `${lines.map((l) => l.text).join('\n')}\n`);
    return file;
  }

  /** kill -9: no cleanup, no offset commit, no leave-group. Resolves once the process is gone. */
  async kill9(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    this.#event(this.incarnation, 'kill -9');
    child.kill('SIGKILL');
    await gone;
  }

  /** SIGSTOP: the process freezes (no heartbeats, no I/O) until SIGCONT. */
  pause(): void {
    process.kill(this.pid, 'SIGSTOP');
  }

  resume(): void {
    process.kill(this.pid, 'SIGCONT');
  }

  /** SIGTERM and wait (kill -9 after `graceMs`). */
  async stop(graceMs = 10_000): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGCONT');
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await gone;
    clearTimeout(timer);
  }
}

/**
 * A private redis-server on a free port, in its own directory. `aof: true` runs
 * it with `--appendonly yes --appendfsync always`: every acknowledged write is on
 * disk before the reply, so a kill -9 and restart loses nothing acknowledged.
 * `fsync: 'everysec'` syncs the AOF once a second instead: the last second of
 * acknowledged writes may be lost.
 */
export class PrivateRedis {
  readonly port: number;
  readonly dir: string;
  readonly #aof: boolean;
  readonly #fsync: 'always' | 'everysec';
  #child: ChildProcess | undefined;

  static async start(options: { aof: boolean; fsync?: 'always' | 'everysec' }): Promise<PrivateRedis> {
    const redis = new PrivateRedis(await freePort(), options.aof, options.fsync ?? 'always');
    await redis.start();
    return redis;
  }

  private constructor(port: number, aof: boolean, fsync: 'always' | 'everysec') {
    this.port = port;
    this.#aof = aof;
    this.#fsync = fsync;
    this.dir = mkdtempSync(join(tmpdir(), 'ctxflow-fault-redis-'));
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--dir', this.dir];
    args.push(...(this.#aof ? ['--appendonly', 'yes', '--appendfsync', this.#fsync] : ['--appendonly', 'no']));
    const child = spawn('redis-server', args, { stdio: 'ignore' });
    this.#child = child;
    running.add(child);
    child.once('exit', () => running.delete(child));
    await waitFor(
      `redis-server on ${this.port}`,
      async () => {
        if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
        const probe = new Redis(this.port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0 });
        probe.on('error', () => {});
        try {
          await probe.connect();
          // Loading an AOF answers LOADING until done.
          return (await probe.ping()) === 'PONG';
        } finally {
          probe.disconnect();
        }
      },
      20_000,
      50,
    );
  }

  /** kill -9 of the server (its script cache goes with it). */
  async kill9(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
  }

  async stop(): Promise<void> {
    await this.kill9();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Stops every child process still running (afterAll safety net). */
export async function stopAll(): Promise<void> {
  await Promise.all(
    [...running].map(
      (child) =>
        new Promise<void>((r) => {
          if (child.exitCode !== null || child.signalCode !== null) return r();
          child.once('exit', () => r());
          child.kill('SIGCONT');
          child.kill('SIGKILL');
        }),
    ),
  );
}

/**
 * Makes sure the topics exist (with the services' partition counts) and points
 * each new consumer group at the current end of its topic, so the services of a
 * test read only records published after this call (the topics are shared with
 * every other run on this broker; a new group would otherwise read from the start).
 */
export async function startGroupsAtEnd(brokers: string[], groups: { groupId: string; topic: string }[]): Promise<void> {
  const bus = createBus({ client: 'platformatic', clientId: 'ctxflow-fault-tests', brokers });
  try {
    await bus.admin.ensureTopics(Object.values(TOPICS).map((name) => ({ name, partitions: 12 })));
  } finally {
    await bus.admin.close();
    await bus.publisher.close();
  }
  const admin = new Kafka({ clientId: 'ctxflow-fault-tests', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    for (const { groupId, topic } of groups) {
      const offsets = await admin.fetchTopicOffsets(topic);
      await admin.setOffsets({
        groupId,
        topic,
        partitions: offsets.map((o) => ({ partition: o.partition, offset: o.high })),
      });
    }
  } finally {
    await admin.disconnect();
  }
}

/** Deletes every key under `prefix:` (SCAN, never KEYS). */
export async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}

/**
 * The seed of a seeded fault test: CTXFLOW_FAULT_SEED when set (an unsigned
 * 32-bit integer), else a random one. The test prints it at the start and in
 * any failure, so a run can be replayed.
 */
export function faultSeed(): number {
  const given = process.env.CTXFLOW_FAULT_SEED;
  if (given === undefined || given === '') return randomInt(2 ** 32);
  if (!/^\d+$/.test(given) || Number(given) >= 2 ** 32) {
    throw new Error(`CTXFLOW_FAULT_SEED must be an integer in [0, 2^32), not ${JSON.stringify(given)}`);
  }
  return Number(given);
}

/** mulberry32: a small seeded PRNG, uniform in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A random integer in [min, max]. */
export function between(min: number, max: number): number {
  return min + Math.floor(Math.random() * (max - min + 1));
}

/**
 * Arms test/faults/freeze-on-commit.ts against a runner: resolves once MONITOR
 * is on; `commit` resolves with the request whose commit froze the runner.
 */
export async function freezeOnCommit(
  redisPort: number,
  prefix: string,
  runnerPid: number,
): Promise<{ commit: Promise<{ requestId: string; stepId: string }>; cancel: () => void }> {
  const child = spawn(
    process.execPath,
    [join(ROOT, 'test/faults/freeze-on-commit.ts'), String(redisPort), prefix, String(runnerPid)],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  running.add(child);
  child.once('exit', () => running.delete(child));
  const lines: string[] = [];
  let rest = '';
  const waiters: (() => void)[] = [];
  child.stdout!.on('data', (chunk: Buffer) => {
    const parts = (rest + chunk.toString('utf8')).split('\n');
    rest = parts.pop() ?? '';
    lines.push(...parts);
    for (const wake of waiters.splice(0)) wake();
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const line = async (index: number): Promise<string> => {
    while (lines.length <= index) {
      if (child.exitCode !== null) throw new Error(`freeze-on-commit exited: ${stderr}`);
      await Promise.race([new Promise<void>((r) => waiters.push(r)), exited]);
    }
    return lines[index]!;
  };
  if ((await line(0)) !== 'ready') throw new Error(`freeze-on-commit: ${lines[0]} ${stderr}`);
  return {
    commit: line(1).then((json) => JSON.parse(json) as { requestId: string; stepId: string }),
    cancel: () => child.kill('SIGKILL'),
  };
}

/**
 * A session-runner and a step-context process wired to each other on free
 * ports (the runner's feed hook is the step-context service; step-context reads a
 * session's owner from the runner's records in Redis), in their own consumer groups. `common` is the
 * environment both share (Kafka, Redis, prefix, timeouts); `runnerEnv` and
 * `stepContextEnv` add to one side.
 */
export async function runnerAndStepContext(options: {
  common: Record<string, string>;
  runnerGroup: string;
  stepContextGroup: string;
  runnerEnv?: Record<string, string>;
  stepContextEnv?: Record<string, string>;
}): Promise<{ runner: ServiceProcess; stepContext: ServiceProcess; runnerPort: number; stepContextPort: number }> {
  const [runnerPort, stepContextPort] = [await freePort(), await freePort()];
  const runner = new ServiceProcess({
    name: 'session-runner',
    entry: ENTRIES.runner,
    port: runnerPort,
    env: serviceEnv({
      ...options.common,
      ...options.runnerEnv,
      CTXFLOW_PORT: String(runnerPort),
      CTXFLOW_RUNNER_GROUP: options.runnerGroup,
      CTXFLOW_STEP_CONTEXT_URL: `http://127.0.0.1:${stepContextPort}/step-context`,
    }),
  });
  const stepContext = stepContextProcess({
    common: { ...options.common, ...options.stepContextEnv },
    group: options.stepContextGroup,
    port: stepContextPort,
  });
  return { runner, stepContext, runnerPort, stepContextPort };
}

/**
 * A step-context process on `port` in consumer group `group`; `common` is the
 * environment it shares with the other services (Kafka, Redis, prefix, timeouts).
 */
export function stepContextProcess(options: {
  common: Record<string, string>;
  group: string;
  port: number;
}): ServiceProcess {
  return new ServiceProcess({
    name: 'step-context',
    entry: ENTRIES.stepContext,
    port: options.port,
    env: serviceEnv({
      ...options.common,
      CTXFLOW_STEP_CONTEXT_PORT: String(options.port),
      CTXFLOW_STEP_CONTEXT_GROUP: options.group,
    }),
  });
}

/**
 * A feed-ingestor process on a free port with `secret` for the generic feed;
 * `common` is the environment it shares with the other services (Kafka,
 * Redis, prefix). `feedUrl` is its generic feed route.
 */
export async function feedIngestor(options: {
  common: Record<string, string>;
  secret: string;
}): Promise<{ feed: ServiceProcess; feedUrl: string }> {
  const port = await freePort();
  const feed = new ServiceProcess({
    name: 'feed-ingestor',
    entry: ENTRIES.feedIngestor,
    port,
    env: serviceEnv({
      ...options.common,
      CTXFLOW_FEED_PORT: String(port),
      CTXFLOW_FEED_SECRET_GENERIC: options.secret,
    }),
  });
  return { feed, feedUrl: `http://127.0.0.1:${port}/feeds/generic` };
}
