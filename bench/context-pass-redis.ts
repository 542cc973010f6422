/**
 * S2 context pass on the Redis store: the p50 of one step (engine.step on
 * RedisSessionStore) that commits 1, 8 and 64 rows, in units of one Redis
 * round trip (p50 of PING on the same connection), and over a plain MULTI
 * writing the same rows (RPUSH of the same JSON + HSET of the same step
 * record). Step, MULTI and PING samples are interleaved, sample by sample.
 *
 * A sample queues N app items (before the timing), then times the step that
 * drains and commits exactly those N rows. The goal figures are steps inside a
 * run, as most of a session's steps are: the runner holds the session (its
 * previous write was this runner's), so the step reads nothing and commits in one
 * script. Each variant's session is replaced every 20 samples, so the log stays
 * short and alike across row counts. A second figure times the FIRST step of a
 * run on a new session, which also reads the agent (a run's context and model
 * apply from the run's start).
 */
import { randomUUID } from 'node:crypto';
import { createEngine, RedisSessionStore } from '@ctxflow/session-runner';
import { Redis } from 'ioredis';
import { cpuMs, perThousand } from './lib/cpu.ts';
import { progress } from './lib/progress.ts';
import { meets, type ScenarioResult } from './lib/report.ts';
import { median, round, summarize } from './lib/stats.ts';

export interface ContextPassOptions {
  redisUrl: string;
  trials: number;
  /** Samples per row count per trial. */
  samples: number;
}

const ROW_COUNTS = [1, 8, 64] as const;
const TENANT = 'bench';
const NOTICE =
  'Ticket PROJ-4312 moved to In Progress by alice@example.com: "Checkout fails for carts over 50 items" (priority P2).';

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

async function deleteByPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}

interface Samples {
  step: number[];
  multi: number[];
  ping: number[];
  stepCpuMs: number;
  /** Wall time of each store call made inside the timed steps, by method. */
  calls: Record<string, number[]>;
}

const emptySamples = (): Samples => ({ step: [], multi: [], ping: [], stepCpuMs: 0, calls: {} });

export async function runContextPass(options: ContextPassOptions): Promise<ScenarioResult[]> {
  const redis = new Redis(options.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  const prefix = `ctxflow-bench-${randomUUID().slice(0, 8)}`;
  const redisStore = new RedisSessionStore(redis, { prefix });
  // Times every store call made while `recording` is set (inside a timed step): where the step's time goes.
  let recording: Record<string, number[]> | undefined;
  const store = new Proxy(redisStore, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        const sink = recording;
        const start = performance.now();
        const result = await value.apply(target, args);
        if (sink) {
          sink[String(name)] ??= [];
          sink[String(name)]!.push(performance.now() - start);
        }
        return result;
      };
    },
  });
  const engine = createEngine({ store });
  try {
    const agent = await engine.createAgent(TENANT, {
      context: 'You are the support desk agent of Example Corp.',
      tools: [{ name: 'search' }, { name: 'edit' }],
    });

    let baselineNo = 0;
    /** In-run variants: the session each steps on, with the samples it took. */
    const running = new Map<string, { sessionId: string; samples: number }>();
    const sessionFor = async (variant: string, firstOfRun: boolean, agentId: string | undefined) => {
      if (firstOfRun) return (await engine.createSession(TENANT, agentId ? { agentId } : {})).sessionId;
      let current = running.get(variant);
      if (!current || current.samples >= 20) {
        const { sessionId } = await engine.createSession(TENANT, agentId ? { agentId } : {});
        await engine.step(TENANT, sessionId); // opens the run
        current = { sessionId, samples: 0 };
        running.set(variant, current);
      }
      current.samples += 1;
      return current.sessionId;
    };
    const sampleOnce = async (rows: number, agentId: string | undefined, into: Samples, firstOfRun = false) => {
      const sessionId = await sessionFor(`${rows}/${agentId}`, firstOfRun, agentId);
      await engine.addContext(TENANT, {
        sessionId,
        items: Array.from({ length: rows }, (_, i) => ({ kind: 'notice', content: `${NOTICE} #${i}` })),
      });
      // The baseline writes what the step wrote: read back after the step, outside the timing.
      const base = `${prefix}:{baseline-${baselineNo++}}`;
      let stepMs = 0;
      let stepId = '';
      const runStep = async () => {
        const cpu = process.cpuUsage();
        recording = into.calls;
        stepMs = await timed(async () => {
          stepId = (await engine.step(TENANT, sessionId)).stepId;
        });
        recording = undefined;
        into.stepCpuMs += cpuMs(cpu);
      };
      const runMulti = async (entries: string[], stepJson: string) =>
        timed(() =>
          redis
            .multi()
            .rpush(`${base}:log`, ...entries)
            .hset(`${base}:steps`, stepId, stepJson)
            .exec(),
        );
      await runStep();
      const entries = await redis.lrange(`${prefix}:{${sessionId}}:log`, -rows, -1);
      const stepJson = (await redis.hget(`${prefix}:{${sessionId}}:steps`, stepId))!;
      into.multi.push(await runMulti(entries, stepJson));
      const step = JSON.parse(stepJson) as { logStart: number; logEnd: number };
      if (step.logEnd - step.logStart !== rows) {
        throw new Error(`the step committed ${step.logEnd - step.logStart} rows, expected ${rows}`);
      }
      into.step.push(stepMs);
      for (let i = 0; i < 3; i++) into.ping.push(await timed(() => redis.ping()));
    };

    // Warm-up: JIT, script cache (EVALSHA), connection.
    const scratch = emptySamples();
    for (let i = 0; i < 20; i++) await sampleOnce(8, agent.agentId, scratch, i % 2 === 0);

    type Variant = { rows: number; agentId: string | undefined; label: string; firstOfRun: boolean };
    const variants: Variant[] = ROW_COUNTS.flatMap((rows) => [
      { rows, agentId: agent.agentId, label: `${rows} rows`, firstOfRun: false },
      { rows, agentId: agent.agentId, label: `${rows} rows, first step of a run`, firstOfRun: true },
    ]);
    const perTrial = new Map<string, Samples[]>(variants.map((v) => [v.label, []]));
    for (let trial = 0; trial < options.trials; trial++) {
      const current = new Map<string, Samples>(variants.map((v) => [v.label, emptySamples()]));
      // Round-robin over the variants, sample by sample: drift hits every variant alike.
      for (let s = 0; s < options.samples; s++) {
        for (const v of variants) await sampleOnce(v.rows, v.agentId, current.get(v.label)!, v.firstOfRun);
      }
      for (const v of variants) perTrial.get(v.label)!.push(current.get(v.label)!);
      const one = current.get('1 rows')!;
      progress(
        `S2 trial ${trial + 1}/${options.trials}: PING p50 ${median(one.ping).toFixed(3)} ms, ` +
          ROW_COUNTS.map((rows) => {
            const c = current.get(`${rows} rows`)!;
            return `${rows} rows step p50 ${median(c.step).toFixed(3)} ms / MULTI ${median(c.multi).toFixed(3)} ms`;
          }).join(', '),
      );
    }

    const results: ScenarioResult[] = [];
    for (const rows of ROW_COUNTS) {
      const trials = perTrial.get(`${rows} rows`)!;
      const first = perTrial.get(`${rows} rows, first step of a run`)!;
      const inRoundTrips = summarize(trials.map((t) => median(t.step) / median(t.ping)));
      const overMulti = summarize(trials.map((t) => median(t.step) / median(t.multi)));
      const firstRoundTrips = summarize(first.map((t) => median(t.step) / median(t.ping)));
      const firstOverMulti = summarize(first.map((t) => median(t.step) / median(t.multi)));
      const steps = trials.reduce((n, t) => n + t.step.length, 0);
      const cpu = {
        'bench process (engine + ioredis), per 1k steps': round(
          perThousand(
            trials.reduce((n, t) => n + t.stepCpuMs, 0),
            steps,
          ),
          1,
        ),
      };
      const figures = {
        'step p50 ms': round(median(trials.map((t) => median(t.step))), 3),
        'MULTI p50 ms': round(median(trials.map((t) => median(t.multi))), 3),
        'PING p50 ms': round(median(trials.map((t) => median(t.ping))), 3),
        'first step of a run: round trips': round(firstRoundTrips.median, 2),
        'first step of a run: over MULTI': round(firstOverMulti.median, 2),
        // Inside the step: each store call's p50 (commitStep = the one Lua commit; getAgent at a run's start).
        ...Object.fromEntries(
          Object.keys(trials[0]!.calls).map((method) => [
            `${method} p50 ms`,
            round(median(trials.map((t) => median(t.calls[method] ?? []))), 3),
          ]),
        ),
      };
      const roundTripGoal = { op: '<=' as const, value: 2 };
      results.push({
        id: `S2-${rows}`,
        title: `Context pass on Redis, ${rows} row${rows === 1 ? '' : 's'}: step p50 in Redis round trips`,
        ratioOf: 'step p50 / PING p50 (same connection)',
        goal: rows === 1 ? roundTripGoal : { op: '<=', value: Number.POSITIVE_INFINITY },
        ratio: inRoundTrips,
        met: rows === 1 ? meets(roundTripGoal, inRoundTrips.median) : true,
        cpuMsPer1k: cpu,
        figures,
        notes: [
          `${options.trials} trials x ${options.samples} samples; a step inside a run of a session with an agent (2 tools), held by the runner: one commit script`,
        ],
      });
      const multiGoal = { op: '<=' as const, value: 1.3 };
      results.push({
        id: `S2-${rows}m`,
        title: `Context pass on Redis, ${rows} row${rows === 1 ? '' : 's'}: over a plain MULTI`,
        ratioOf: 'step p50 / MULTI (RPUSH same rows + HSET same step) p50',
        goal: multiGoal,
        ratio: overMulti,
        met: meets(multiGoal, overMulti.median),
        cpuMsPer1k: cpu,
        figures,
      });
    }
    return results;
  } finally {
    await deleteByPrefix(redis, prefix);
    redis.disconnect();
  }
}
