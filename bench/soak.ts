/**
 * The soak row (`npm run bench -- --only=soak`): the three stack services as
 * deployed, at steady load for ten minutes, and whether they hold up.
 *
 * - Processes: feed-ingestor, step-context and session-runner, each its own
 *   Node process on the shared Kafka and Redis (a topic prefix, consumer
 *   groups and a Redis key prefix of this run, all deleted afterwards), with
 *   the environment deploy/kubernetes gives it: each Deployment's own values
 *   (`NODE_OPTIONS=--max-old-space-size=...`, `CTXFLOW_HELD_BYTES`) and the
 *   ConfigMap's `CTXFLOW_*` settings (log level, grace, session TTL); only the
 *   addresses are local. No OTLP endpoint: telemetry off.
 * - Sessions: 200 sessions of one agent (a system prompt and a tool), 4 per
 *   ticket (50 generic tickets), subscribed over `POST /sessions/:id/subscriptions`.
 * - Load: six clients, each owning a sixth of the sessions and tickets, each
 *   one operation at a time, back to back, in a fixed mix: a step turn, a
 *   webhook, a step turn, an app item. A step turn is what a runtime does: the
 *   user's message (`POST /sessions/:id/messages`), the step with `since` = the
 *   messages it holds from the previous answer (`POST /sessions/:id/steps`;
 *   it appends the delta, or replaces what it holds when the answer's
 *   `request.since` is 0), the assistant's answer. A webhook is a signed
 *   `POST /feeds/generic` to the feed-ingestor (a fresh event id, the ticket's
 *   version increasing), which reaches the ticket's 4 sessions as rows of
 *   their next steps; an app item is `POST /context` with a fresh key. So every
 *   session's log grows for the whole run.
 * - Sampling: after a warm-up, once a minute: operations (throughput), step
 *   latency, errors, each process's CPU from /proc/<pid>/stat and its RSS from
 *   /proc/<pid>/status (VmRSS at the minute's end, the largest of the samples
 *   taken every 5 s, and VmHWM, the kernel's peak since the process started).
 *
 * Goals: throughput in the last minute >= 0.8x the first; every process's RSS
 * peak (VmHWM) within its Deployment's memory limit (read from the manifests);
 * 0 errors (a non-2xx answer, a failed or timed-out request, a step whose
 * feed context was skipped, a log line at level error or fatal, a process
 * that exits).
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { deletePrefix, freePort, sleep } from '../test/faults/processes.ts';
import { progress } from './lib/progress.ts';
import type { ScenarioResult } from './lib/report.ts';
import { newCounters, PRESETS, poster, type SoakPreset, startLoad } from './lib/soak-load.ts';
import {
  cleanup,
  deployedSettings,
  heapSnapshot,
  procCpuMs,
  procRss,
  SERVICES,
  Service,
  type ServiceName,
} from './lib/soak-processes.ts';
import { soakResults } from './lib/soak-results.ts';
import { quantile, round } from './lib/stats.ts';

export { PRESETS, type SoakPreset } from './lib/soak-load.ts';

export interface SoakOptions {
  brokers: string[];
  redisUrl: string;
  /** Measured minutes after the warm-up (default 10). */
  minutes: number;
  /** Extra NODE_OPTIONS for the session-runner (e.g. --cpu-prof), after the manifest's. */
  runnerNodeOptions?: string;
  /** A heap snapshot of the session-runner after the last minute, under load, into this folder. */
  heapSnapshotDir?: string;
  /** With heapSnapshotDir: a snapshot also after every this many minutes, under load (compare them by retainer). */
  heapSnapshotEveryMinutes?: number;
  /** The load's shape (PRESETS); default `turns`. */
  preset?: SoakPreset;
}

const SESSIONS = 200;
const SESSIONS_PER_TICKET = 4;
const CLIENTS = 6;
const WARMUP_MS = 20_000;
const MINUTE_MS = 60_000;
const RSS_EVERY_MS = 5_000;

export async function runSoak(options: SoakOptions): Promise<ScenarioResult[]> {
  const presetName = options.preset ?? 'turns';
  const preset = PRESETS[presetName];
  const perMinute = MINUTE_MS / preset.periodMs;
  const deployed = deployedSettings();
  if (options.heapSnapshotDir) mkdirSync(options.heapSnapshotDir, { recursive: true });
  const run = randomUUID().slice(0, 8);
  const topicPrefix = `ctxflow-bench-soak-${run}.`;
  const redisPrefix = `bench-soak-${run}`;
  const groups = { runner: `ctxflow-bench-soak-${run}-runner`, stepContext: `ctxflow-bench-soak-${run}-step-context` };
  const secret = `soak-${randomUUID()}`;
  const errors: string[] = [];
  const noteError = (what: string) => {
    if (errors.length < 20) errors.push(what);
  };
  let aborted: string | undefined;

  const ports = { feed: await freePort(), stepContext: await freePort(), runner: await freePort() };
  const common = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    CTXFLOW_HOST: '127.0.0.1',
    KAFKA_BROKERS: options.brokers.join(','),
    KAFKA_TOPIC_PREFIX: topicPrefix,
    REDIS_URL: options.redisUrl,
    CTXFLOW_REDIS_PREFIX: redisPrefix,
  };
  const envOf: Record<ServiceName, Record<string, string>> = {
    'feed-ingestor': { CTXFLOW_FEED_PORT: String(ports.feed), CTXFLOW_FEED_SECRET_GENERIC: secret },
    'step-context': {
      CTXFLOW_STEP_CONTEXT_PORT: String(ports.stepContext),
      CTXFLOW_STEP_CONTEXT_GROUP: groups.stepContext,
    },
    'session-runner': {
      CTXFLOW_PORT: String(ports.runner),
      CTXFLOW_RUNNER_GROUP: groups.runner,
      CTXFLOW_STEP_CONTEXT_URL: `http://127.0.0.1:${ports.stepContext}/step-context`,
    },
  };
  const portOf: Record<ServiceName, number> = {
    'feed-ingestor': ports.feed,
    'step-context': ports.stepContext,
    'session-runner': ports.runner,
  };
  const services: Service[] = [];
  const redis = new Redis(options.redisUrl);
  try {
    for (const s of SERVICES) {
      const env: NodeJS.ProcessEnv = { ...common, ...deployed[s.name].env, ...envOf[s.name] };
      if (s.name === 'session-runner') {
        const extra = [
          options.runnerNodeOptions ?? '',
          options.heapSnapshotDir ? `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${options.heapSnapshotDir}` : '',
        ].join(' ');
        if (extra.trim()) env.NODE_OPTIONS = `${env.NODE_OPTIONS} ${extra.trim()}`;
      }
      services.push(
        new Service(s.name, s.entry, portOf[s.name], env, (service) => {
          aborted ??= service.exited;
        }),
      );
    }
    progress(
      `soak: starting ${SERVICES.map((s) => `${s.name} (NODE_OPTIONS=${deployed[s.name].env.NODE_OPTIONS}, limit ${deployed[s.name].memoryLimitBytes / 2 ** 20} MiB)`).join(', ')}`,
    );
    await Promise.all(services.map((s) => s.ready()));
    const [feed, , runner] = services as [Service, Service, Service];

    const post = poster(noteError);
    const json = { 'content-type': 'application/json' };
    const setup = newCounters();
    const created = async (path: string, body: object): Promise<Record<string, string>> => {
      const text = await post(`${runner.url}${path}`, JSON.stringify(body), json, setup);
      if (text === undefined) throw new Error(`soak setup: POST ${path} failed: ${errors.join('; ')}`);
      return text ? (JSON.parse(text) as Record<string, string>) : {};
    };

    const { agentId } = await created('/agents', {
      context: [
        {
          id: 'persona',
          content: 'You are the support desk agent of Example Corp. Answer briefly and cite the ticket.',
        },
      ],
      tools: [
        { name: 'search', description: 'Searches the knowledge base.', parameters: { type: 'object', properties: {} } },
      ],
    });
    const tickets = Array.from({ length: SESSIONS / SESSIONS_PER_TICKET }, (_, t) => `SOAK-${run}-${t}`);
    const sessions: string[] = [];
    for (let i = 0; i < SESSIONS; i++) {
      const { sessionId } = await created('/sessions', { agentId });
      await created(`/sessions/${sessionId}/subscriptions`, {
        source: 'generic',
        ticket: tickets[Math.floor(i / SESSIONS_PER_TICKET)]!,
      });
      sessions.push(sessionId!);
    }
    progress(
      `soak: ${SESSIONS} sessions, ${SESSIONS_PER_TICKET} per ticket (${tickets.length} tickets), ${CLIENTS} clients`,
    );

    const cpu = () =>
      Object.fromEntries(services.map((s) => [s.name, procCpuMs(s.pid)])) as Record<ServiceName, number>;
    const load = startLoad({
      runnerUrl: runner.url,
      feedUrl: feed.url,
      secret,
      sessions,
      tickets,
      run,
      preset,
      clients: CLIENTS,
      post,
      noteError,
    });

    progress(
      `soak (${presetName}): ${WARMUP_MS / 1000} s warm-up, then ${options.minutes} measured minutes, sampled every ${preset.periodMs / 1000} s`,
    );
    await sleep(WARMUP_MS);
    const curve: Record<string, unknown>[] = [];
    const rssPeaks = Object.fromEntries(services.map((s) => [s.name, 0])) as Record<ServiceName, number>;
    let cpuBefore = cpu();
    load.take();
    let periodStart = performance.now();
    const periods = options.minutes * perMinute;
    const snapshotEvery = options.heapSnapshotEveryMinutes ?? 0;
    for (let period = 1; period <= periods && !aborted; period++) {
      const rssMax = Object.fromEntries(services.map((s) => [s.name, 0])) as Record<ServiceName, number>;
      const end = periodStart + preset.periodMs;
      while (performance.now() < end && !aborted) {
        await sleep(Math.min(RSS_EVERY_MS, end - performance.now()));
        if (aborted) break;
        for (const s of services) rssMax[s.name] = Math.max(rssMax[s.name], procRss(s.pid).rss);
      }
      if (aborted) break;
      const c = load.take();
      const seconds = (performance.now() - periodStart) / 1000;
      const cpuNow = cpu();
      const ops = c.ops.turn + c.ops.webhook + c.ops.context + c.ops.step + c.ops.user;
      const mem = Object.fromEntries(services.map((s) => [s.name, procRss(s.pid)])) as Record<
        ServiceName,
        { rss: number; hwm: number }
      >;
      for (const s of services) rssPeaks[s.name] = Math.max(rssPeaks[s.name], mem[s.name].hwm);
      const mb = (b: number) => round(b / 2 ** 20, 1);
      const cpuMs = Object.fromEntries(services.map((s) => [s.name, cpuNow[s.name] - cpuBefore[s.name]])) as Record<
        ServiceName,
        number
      >;
      const kb = c.stepBytes / 1024;
      const point = {
        ...(perMinute === 1 ? {} : { period, atS: round((period * preset.periodMs) / 1000, 0) }),
        minute: Math.ceil(period / perMinute),
        ops,
        opsPerS: round(ops / seconds, 1),
        byKind: { ...c.ops },
        requests: c.requests,
        errors: c.errors,
        rowsInSteps: c.rows,
        stepsReplacingHeldMessages: c.replaced,
        stepP50Ms: round(quantile(c.stepMs, 0.5), 2),
        stepP99Ms: round(quantile(c.stepMs, 0.99), 2),
        stepKiB: round(kb, 0),
        rssMiB: Object.fromEntries(services.map((s) => [s.name, mb(mem[s.name].rss)])),
        rssMaxSampleMiB: Object.fromEntries(services.map((s) => [s.name, mb(rssMax[s.name])])),
        rssPeakMiB: Object.fromEntries(services.map((s) => [s.name, mb(mem[s.name].hwm)])),
        cpuMs: Object.fromEntries(services.map((s) => [s.name, round(cpuMs[s.name], 0)])),
        cpuMsPerOp: Object.fromEntries(services.map((s) => [s.name, round(cpuMs[s.name] / Math.max(ops, 1), 3)])),
        cpuMsPerKiB: Object.fromEntries(
          services.map((s) => [s.name, kb > 0 ? round(cpuMs[s.name] / kb, 4) : Number.NaN]),
        ),
        errorLogLines: services.reduce((n, s) => n + s.errorLines.length, 0),
        loadAverage1m: round(loadavg()[0]!, 2),
      };
      curve.push(point);
      progress(
        `soak ${perMinute === 1 ? `minute ${period}/${periods}` : `${point.atS} s`}: ${ops} ops (${point.opsPerS}/s; ${Object.entries(
          c.ops,
        )
          .filter(([, n]) => n > 0)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ')}), ` +
          `step p50 ${point.stepP50Ms} ms, ${point.stepKiB} KiB returned, RSS ${services.map((s) => `${s.name} ${point.rssMiB[s.name]} MiB`).join(', ')}, ` +
          `CPU ms/op ${services.map((s) => `${s.name} ${point.cpuMsPerOp[s.name]}`).join(', ')}, runner CPU ms/KiB ${point.cpuMsPerKiB['session-runner']}, errors ${c.errors}, load ${point.loadAverage1m}`,
      );
      if (
        options.heapSnapshotDir &&
        snapshotEvery > 0 &&
        period % (snapshotEvery * perMinute) === 0 &&
        period < periods
      ) {
        await heapSnapshot(runner.pid, options.heapSnapshotDir);
      }
      // A snapshot's pause is not part of the next period.
      cpuBefore = cpu();
      periodStart = performance.now();
    }
    if (options.heapSnapshotDir && !aborted) await heapSnapshot(runner.pid, options.heapSnapshotDir);
    await load.stop();

    const shape =
      presetName === 'turns'
        ? 'mix per client: step turn, webhook, step turn, app item'
        : `mix per client: webhook, app item, ${preset.since ? 'delta step (since)' : 'full step'} with a requestId; a user message after every ${preset.userEvery} operations`;
    const setupNote = `preset ${presetName}: ${SESSIONS} sessions (${SESSIONS_PER_TICKET} per ticket), ${CLIENTS} clients back to back, ${shape}; ${WARMUP_MS / 1000} s warm-up, then ${options.minutes} min sampled every ${preset.periodMs / 1000} s`;
    return soakResults({
      presetName,
      minutes: options.minutes,
      setupNote,
      services,
      deployed,
      curve,
      rssPeaks,
      setup,
      errors,
      aborted,
    });
  } finally {
    await Promise.allSettled(services.map((s) => s.stop()));
    await cleanup(options.brokers, topicPrefix, Object.values(groups)).catch((err) =>
      progress(`soak: topic clean-up failed: ${String(err)}`),
    );
    await deletePrefix(redis, redisPrefix);
    redis.disconnect();
  }
}
