/**
 * `npm run bench`: every scenario as a ratio to a baseline measured in the same
 * run on this machine, interleaved over several trials; median ratio with min
 * and max, and CPU milliseconds per 1,000 messages per process.
 *
 *   npm run bench                   full run (about 5-6 minutes on 2 cores)
 *   npm run bench -- --quick        smoke run (about 1 minute): fewer, shorter trials
 *   npm run bench -- --json         the JSON document on stdout (progress stays on stderr),
 *                                   also written to bench/results/<startedAt>.json and, for full runs,
 *                                   to bench/results/latest.json and docs/performance.md's figures
 *   npm run bench -- --only=S3,S5   some scenarios (S1 S2 S3 S4 S5 S6 S7 S8 S9 S10; S3, S4 (with S4b) and S6 run together,
 *                                   and so do S1 and S6: S6 is OpenTelemetry on over off on S3's
 *                                   `POST /context` (row S6) and in S1's pipeline (rows S6-S1-*);
 *                                   S3 includes S3-jwt and S3-jwt-verify, a JWT beside an API key;
 *                                   S5 includes its rows per provider format, S5-openai-chat etc.;
 *                                   S9 is a step in each provider format over the neutral step;
 *                                   S7 starts a redis-server of its own and prints its curves
 *                                   under `curve` in the JSON)
 *   npm run bench -- --only=S6-S1   S1's pipeline with the telemetry sides (S1 and S6-S1 rows), without
 *                                   the HTTP scenarios
 *   npm run bench -- --cpu-prof     CPU profiles of the server processes and the pipeline's consumer
 *                                   processes into bench/results/profiles (with the soak: the session-runner's)
 *   npm run bench -- --heap-prof    with the soak: a sampling heap profile of the session-runner (what is
 *                                   live when it stops) into bench/results/profiles; --heap-snapshot: a heap
 *                                   snapshot of it after the last minute, under load, there too
 *   npm run bench -- --only=S8 --s8-steps=10000   S8 after another number of steps (one trial; with
 *                                   --json written to bench/results/<startedAt>.json, as a soak is)
 *   npm run bench -- --only=soak    the soak (soak.ts): the three stack services as deployed at steady load
 *                                   for 10 minutes (--soak-minutes=2 for a shorter run; --quick: 2); only run
 *                                   when named in --only, never in the default run; --soak-preset=NAME
 *                                   its load's shape (soak.ts PRESETS: turns, the default; thirds: webhooks,
 *                                   app items and delta steps in equal shares, sampled every 15 s;
 *                                   thirds-full: the same with full steps); --heap-snapshot-every=N with
 *                                   --heap-snapshot: a session-runner heap snapshot every N minutes too
 *
 * S1, S2, S6 and the soak need Kafka and Redis: KAFKA_BROKERS and REDIS_URL when set, otherwise
 * the local ones are started as `npm run stack` does (scripts/infra.ts).
 */
import { execSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { join, relative } from 'node:path';
import type { KafkaClientName } from '@ctxflow/bus';
import { ensureKafka, ensureRedis, KAFKA_BROKERS, REDIS_URL, ROOT } from '../scripts/infra.ts';
import { runAuthCost } from './auth-cost.ts';
import { runContextPass } from './context-pass-redis.ts';
import { runFanOut } from './fan-out.ts';
import { runHttpScenarios } from './http-scenarios.ts';
import { progress } from './lib/progress.ts';
import type { ScenarioResult, SkippedScenario } from './lib/report.ts';
import { recordRun } from './lib/results.ts';
import { round } from './lib/stats.ts';
import { runPipeline } from './pipeline-kafka.ts';
import { runPrefixStability } from './prefix-stability.ts';
import { runProviderPrefix, runProviderSteps } from './provider-formats.ts';
import { runSessionMemory } from './session-memory.ts';
import { PRESETS, runSoak, type SoakPreset } from './soak.ts';
import { runTenantIsolation } from './tenant-isolation.ts';

const args = process.argv.slice(2);
const json = args.includes('--json');
const quick = args.includes('--quick');
const cpuProf = args.includes('--cpu-prof');
const heapProf = args.includes('--heap-prof');
const heapSnapshot = args.includes('--heap-snapshot');
const only = args
  .find((a) => a.startsWith('--only='))
  ?.slice('--only='.length)
  .split(',')
  .map((s) => s.trim().toUpperCase());
const wants = (...ids: string[]) => only === undefined || ids.some((id) => only.includes(id));
/** S6-S1 alone: the pipeline with its telemetry sides, not S6 on `POST /context`. */
const wantsS6S1 = wants('S6') || only?.includes('S6-S1') === true;
/** The soak runs only when asked for by name: it takes 10 minutes. */
const wantsSoak = only?.includes('SOAK') === true;
const soakPreset = (args.find((a) => a.startsWith('--soak-preset='))?.slice('--soak-preset='.length) ??
  'turns') as SoakPreset;
if (!(soakPreset in PRESETS)) {
  throw new Error(`--soak-preset: one of ${Object.keys(PRESETS).join(', ')} (got ${soakPreset})`);
}
const snapshotEveryArg = args
  .find((a) => a.startsWith('--heap-snapshot-every='))
  ?.slice('--heap-snapshot-every='.length);
const snapshotEvery = snapshotEveryArg === undefined ? 0 : Number(snapshotEveryArg);
if (!Number.isInteger(snapshotEvery) || snapshotEvery < 0) {
  throw new Error(`--heap-snapshot-every: a whole number of minutes (got ${snapshotEveryArg})`);
}
const soakMinutesArg = args.find((a) => a.startsWith('--soak-minutes='))?.slice('--soak-minutes='.length);
const soakMinutes = soakMinutesArg === undefined ? (quick ? 2 : 10) : Number(soakMinutesArg);
if (!Number.isInteger(soakMinutes) || soakMinutes < 1) {
  throw new Error(`--soak-minutes: a whole number of minutes, at least 1 (got ${soakMinutesArg})`);
}

/** Trials and sizes: the full run fits in ~5 minutes on 2 cores; --quick in ~1. */
const plan = quick
  ? {
      http: { trials: 2, slices: 3, sliceSeconds: 0.5, warmupSeconds: 0.5, connections: 10, sessionsPerRun: 200 },
      redis: { trials: 2, samples: 15 },
      kafka: { trials: 2, records: 500, latencySamples: 20 },
      steps: { trials: 2, blocks: 4, stepsPerBlock: 10 },
    }
  : {
      http: { trials: 5, slices: 6, sliceSeconds: 0.5, warmupSeconds: 1, connections: 10, sessionsPerRun: 500 },
      redis: { trials: 5, samples: 40 },
      kafka: { trials: 3, records: 3000, latencySamples: 100 },
      steps: { trials: 5, blocks: 8, stepsPerBlock: 15 },
    };

function git(command: string): string {
  try {
    return execSync(`git ${command}`, { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

const startedAt = new Date();
// The code measured: the commit at the start, and files of the product changed since (uncommitted).
const commit = git('rev-parse --short HEAD');
const uncommitted = git('status --porcelain -- services shared')
  .split('\n')
  .filter((line) => line.trim().length > 0).length;
const loadBefore = loadavg();
const scenarios: ScenarioResult[] = [];
const skipped: SkippedScenario[] = [];

progress(
  `${quick ? 'quick' : 'full'} run on ${cpus().length} cores, Node ${process.version}, load average ${loadBefore.map((l) => l.toFixed(1)).join(' ')}`,
);

if (wants('S3', 'S4', 'S6')) {
  scenarios.push(
    ...(await runHttpScenarios({
      ...plan.http,
      ...(cpuProf ? { serverExecArgv: ['--cpu-prof', '--cpu-prof-dir=bench/results/profiles'] } : {}),
    })),
  );
}
if (wants('S3')) scenarios.push(...(await runAuthCost(plan.http)));
if (wants('S5')) {
  scenarios.push(...(await runPrefixStability()).results);
  scenarios.push(...(await runProviderPrefix()));
}
if (wants('S9')) scenarios.push(...(await runProviderSteps(plan.steps)));

let redisUrl = process.env.REDIS_URL;
if ((wants('S1', 'S2', 'S8', 'S10') || wantsS6S1 || wantsSoak) && !redisUrl) {
  await ensureRedis();
  redisUrl = REDIS_URL;
}
if (wants('S2')) scenarios.push(...(await runContextPass({ redisUrl: redisUrl!, ...plan.redis })));
if (wants('S7')) {
  scenarios.push(
    ...(await runFanOut(quick ? { trials: 1, updates: 10, reads: 50 } : { trials: 3, updates: 30, reads: 200 })),
  );
}
const s8StepsArg = args.find((a) => a.startsWith('--s8-steps='))?.slice('--s8-steps='.length);
if (wants('S8')) {
  const steps = s8StepsArg === undefined ? undefined : Number(s8StepsArg);
  if (steps !== undefined && (!Number.isInteger(steps) || steps < 1)) {
    throw new Error(`--s8-steps: a whole number of steps, at least 1 (got ${s8StepsArg})`);
  }
  scenarios.push(
    ...(await runSessionMemory({
      redisUrl: redisUrl!,
      trials: quick || steps !== undefined ? 1 : 3,
      ...(steps === undefined ? {} : { steps }),
    })),
  );
}
if (wants('S10')) {
  scenarios.push(...(await runTenantIsolation({ redisUrl: redisUrl!, trials: quick ? 1 : 3, seconds: quick ? 2 : 4 })));
}
if (wants('S1') || wantsS6S1) {
  let brokers = process.env.KAFKA_BROKERS;
  if (!brokers) {
    await ensureKafka();
    brokers = KAFKA_BROKERS;
  }
  const clients: KafkaClientName[] = ['kafkajs', 'platformatic'];
  scenarios.push(
    ...(await runPipeline({
      brokers: brokers.split(','),
      redisUrl: redisUrl!,
      clients,
      ...plan.kafka,
      telemetry: wantsS6S1,
      ...(cpuProf ? { consumerExecArgv: ['--cpu-prof', '--cpu-prof-dir=bench/results/profiles'] } : {}),
    })),
  );
}

if (wantsSoak) {
  let brokers = process.env.KAFKA_BROKERS;
  if (!brokers) {
    await ensureKafka();
    brokers = KAFKA_BROKERS;
  }
  scenarios.push(
    ...(await runSoak({
      brokers: brokers.split(','),
      redisUrl: redisUrl!,
      minutes: soakMinutes,
      preset: soakPreset,
      runnerNodeOptions: [
        ...(cpuProf ? ['--cpu-prof', '--cpu-prof-dir=bench/results/profiles'] : []),
        ...(heapProf ? ['--heap-prof', '--heap-prof-dir=bench/results/profiles'] : []),
      ].join(' '),
      ...(heapSnapshot
        ? { heapSnapshotDir: join(ROOT, 'bench/results/profiles'), heapSnapshotEveryMinutes: snapshotEvery }
        : {}),
    })),
  );
}

const document = {
  startedAt: startedAt.toISOString(),
  durationS: round((Date.now() - startedAt.getTime()) / 1000, 1),
  mode: quick ? 'quick' : 'full',
  machine: {
    cores: cpus().length,
    cpu: cpus()[0]?.model ?? 'unknown',
    node: process.version,
    loadAverageBefore: loadBefore.map((l) => round(l, 2)),
    loadAverageAfter: loadavg().map((l) => round(l, 2)),
  },
  commit,
  uncommittedProductFiles: uncommitted,
  plan,
  scenarios,
  skipped,
};

const fmt = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : '-');
const goalText = (s: ScenarioResult) => (Number.isFinite(s.goal.value) ? `${s.goal.op} ${s.goal.value}` : 'report');
const lines = [
  '',
  `ctxflow benchmark (${document.mode}): ${document.machine.cores} cores, Node ${document.machine.node}, load average ${document.machine.loadAverageBefore.join(' ')}, ${document.durationS} s`,
  '',
  '| scenario | goal | median ratio (min-max) | met | CPU ms/1k | figures |',
  '|---|---|---|---|---|---|',
  ...scenarios.map(
    (s) =>
      `| ${s.id} ${s.title}: ${s.ratioOf} | ${goalText(s)} | ${fmt(s.ratio.median)} (${fmt(s.ratio.min)}-${fmt(s.ratio.max)}) | ${Number.isFinite(s.goal.value) ? (s.met ? 'yes' : '**no**') : '-'} | ${Object.entries(
        s.cpuMsPer1k,
      )
        .map(([k, v]) => `${k} ${v}`)
        .join('; ')} | ${Object.entries(s.figures)
        .map(([k, v]) => `${k} ${v}`)
        .join('; ')} |`,
  ),
  ...skipped.map((s) => `| ${s.id} ${s.title} | - | skipped: ${s.reason} | - | - | - |`),
  '',
  ...scenarios.flatMap((s) => (s.curve ? [`${s.id} curve:`, ...s.curve.map((p) => JSON.stringify(p)), ''] : [])),
];

if (json) {
  process.stdout.write(`${JSON.stringify(document, null, 2)}\n`);
  // A full run is the new latest.json (and the figures of docs/performance.md); a soak and a long
  // S8 run (--s8-steps), never part of a full run, are kept in the history too.
  if (!quick && (only === undefined || wantsSoak || s8StepsArg !== undefined)) {
    for (const file of recordRun(document, { root: ROOT, latest: only === undefined })) {
      progress(`written: ${relative(ROOT, file)}`);
    }
  }
  process.stderr.write(`${lines.join('\n')}\n`);
} else {
  process.stdout.write(`${lines.join('\n')}\n`);
}
process.exit(0);
