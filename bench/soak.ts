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
import { type ChildProcess, execSync, spawn } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import kafkajs from 'kafkajs';
import { parseAllDocuments } from 'yaml';
import { ROOT } from '../scripts/infra.ts';
import { deletePrefix, freePort, sleep, waitFor } from '../test/faults/processes.ts';
import { progress } from './lib/progress.ts';
import { meets, type ScenarioResult } from './lib/report.ts';
import { quantile, round } from './lib/stats.ts';

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

/**
 * The load shapes. `turns`: each client in a fixed mix of a step turn, a webhook, a step
 * turn, an app item, sampled once a minute. `thirds` (a runtime holding its messages,
 * in equal shares with feeds and the app): each client in turn a webhook, an app item and a
 * step with `since` and a fresh `requestId` (nothing else: what the step returns is the
 * session's rows and messages), a user message after every 30 operations, sampled every
 * 15 s. `thirds-full`: the same with full steps (no `since`).
 */
export const PRESETS = {
  turns: { mix: ['turn', 'webhook', 'turn', 'context'], periodMs: 60_000, since: true, userEvery: 0 },
  thirds: { mix: ['webhook', 'context', 'step'], periodMs: 15_000, since: true, userEvery: 30 },
  'thirds-full': { mix: ['webhook', 'context', 'step'], periodMs: 15_000, since: false, userEvery: 30 },
} as const satisfies Record<string, { mix: readonly Kind[]; periodMs: number; since: boolean; userEvery: number }>;
export type SoakPreset = keyof typeof PRESETS;

const SESSIONS = 200;
const SESSIONS_PER_TICKET = 4;
const CLIENTS = 6;
const WARMUP_MS = 20_000;
const MINUTE_MS = 60_000;
const RSS_EVERY_MS = 5_000;
const REQUEST_TIMEOUT_MS = 30_000;
const THROUGHPUT_GOAL = { op: '>=' as const, value: 0.8 };
/** VmHWM at most 450 MiB of a 512Mi limit (0.88): room for a spike before the kernel's OOM kill. */
const RSS_GOAL = { op: '<=' as const, value: 0.88 };
const ERRORS_GOAL = { op: '==' as const, value: 0 };
/** The goal of a full-steps run: session-runner CPU per returned kilobyte, last minute over the second. */
const CPU_PER_KB_GOAL = { op: '<=' as const, value: 1.2 };
type Kind = 'turn' | 'webhook' | 'context' | 'step' | 'user';

const SERVICES = [
  { name: 'feed-ingestor', entry: 'services/feed-ingestor/src/main.ts', portVar: 'CTXFLOW_FEED_PORT' },
  { name: 'step-context', entry: 'services/step-context/src/main.ts', portVar: 'CTXFLOW_STEP_CONTEXT_PORT' },
  { name: 'session-runner', entry: 'services/session-runner/src/main.ts', portVar: 'CTXFLOW_PORT' },
] as const;
type ServiceName = (typeof SERVICES)[number]['name'];

/** ConfigMap settings that are addresses of the cluster: replaced with this run's local ones. */
const ADDRESSES = new Set(['CTXFLOW_HOST', 'CTXFLOW_STEP_CONTEXT_URL']);
/** Files the pods mount from Secrets: the soak runs without API keys or a service token, as before they existed. */
const MOUNTED = new Set(['CTXFLOW_API_KEYS_FILE', 'CTXFLOW_SERVICE_TOKEN_FILE']);

type Doc = Record<string, any>;

/** A Kubernetes memory quantity (`512Mi`, `1Gi`, `500M`, bytes) in bytes. */
export function quantityBytes(quantity: string): number {
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(quantity));
  if (!match) throw new Error(`unexpected memory quantity ${quantity}`);
  const units: Record<string, number> = {
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
  };
  return Math.round(Number(match[1]) * (units[match[2] ?? ''] ?? 1));
}

/** What deploy/kubernetes gives each service: its environment values and its memory limit. */
export function deployedSettings(): Record<ServiceName, { env: Record<string, string>; memoryLimitBytes: number }> {
  const dir = join(ROOT, 'deploy', 'kubernetes');
  const docs: Doc[] = readdirSync(dir)
    .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
    .flatMap((f) => parseAllDocuments(readFileSync(join(dir, f), 'utf8')).map((d) => d.toJS() as Doc));
  const config = docs.find((d) => d.kind === 'ConfigMap' && d.metadata?.name === 'ctxflow-config');
  if (!config) throw new Error('no ConfigMap ctxflow-config in deploy/kubernetes');
  const shared = Object.fromEntries(
    Object.entries(config.data as Record<string, string>).filter(
      ([k]) => k.startsWith('CTXFLOW_') && !ADDRESSES.has(k) && !MOUNTED.has(k),
    ),
  );
  const out = {} as Record<ServiceName, { env: Record<string, string>; memoryLimitBytes: number }>;
  for (const service of SERVICES) {
    const deployment = docs.find((d) => d.kind === 'Deployment' && d.metadata?.name === service.name);
    const container = deployment?.spec?.template?.spec?.containers?.[0];
    if (!container) throw new Error(`no Deployment ${service.name} in deploy/kubernetes`);
    const limit = container.resources?.limits?.memory;
    if (!limit) throw new Error(`Deployment ${service.name} sets no memory limit`);
    // Its own literal values (not fieldRef ones); the port is this run's.
    const own = Object.fromEntries(
      (container.env as Doc[])
        .filter((e) => typeof e.value === 'string' && (e.name === 'NODE_OPTIONS' || e.name.startsWith('CTXFLOW_')))
        .filter((e) => e.name !== service.portVar && !MOUNTED.has(e.name))
        .map((e) => [e.name, e.value as string]),
    );
    if (!own.NODE_OPTIONS) throw new Error(`Deployment ${service.name} sets no NODE_OPTIONS`);
    out[service.name] = { env: { ...shared, ...own }, memoryLimitBytes: quantityBytes(limit) };
  }
  return out;
}

const CLOCK_TICKS_PER_S = Number(execSync('getconf CLK_TCK', { encoding: 'utf8' }).trim()) || 100;

/** user + system CPU ms of a process, from /proc/<pid>/stat. */
function procCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields from the 3rd (state) on: utime is the 14th, stime the 15th.
  return ((Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S) * 1000;
}

/** VmRSS and VmHWM (the peak) of a process in bytes, from /proc/<pid>/status. */
function procRss(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rss: kb('VmRSS') * 1024, hwm: kb('VmHWM') * 1024 };
}

/** A service process; its stdout (pino JSON) is scanned for error and fatal lines only. */
class Service {
  readonly name: ServiceName;
  readonly port: number;
  readonly #child: ChildProcess;
  readonly errorLines: string[] = [];
  readonly stderr: string[] = [];
  exited: string | undefined;

  constructor(name: ServiceName, entry: string, port: number, env: NodeJS.ProcessEnv, onExit: (s: Service) => void) {
    this.name = name;
    this.port = port;
    this.#child = spawn(process.execPath, [join(ROOT, entry)], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let rest = '';
    this.#child.stdout!.on('data', (chunk: Buffer) => {
      const lines = (rest + chunk.toString('utf8')).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) if (/"level":(50|60)\b/.test(line)) this.errorLines.push(line.slice(0, 500));
    });
    this.#child.stderr!.on('data', (chunk: Buffer) => {
      this.stderr.push(chunk.toString('utf8'));
      if (this.stderr.length > 50) this.stderr.shift();
    });
    this.#child.once('exit', (code, signal) => {
      this.exited = `${this.name} exited (${signal ?? code}): ${this.stderr.join('').slice(-1500)}`;
      onExit(this);
    });
  }

  get pid(): number {
    return this.#child.pid!;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async ready(): Promise<void> {
    await waitFor(
      `${this.name} to answer /readyz 200`,
      async () => {
        if (this.exited) throw new Error(this.exited);
        return (await fetch(`${this.url}/readyz`)).status === 200;
      },
      90_000,
      200,
    );
  }

  async stop(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    const gone = new Promise((r) => this.#child.once('exit', r));
    this.#child.kill('SIGTERM');
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), 40_000);
    await gone;
    clearTimeout(timer);
  }
}

/** The generic feed's signature headers (`x-ctxflow-timestamp`, `x-ctxflow-signature`) over `body`. */
function signed(secret: string, body: string): Record<string, string> {
  const ts = Math.floor(Date.now() / 1000);
  const mac = createHmac('sha256', secret).update(`${ts}.`).update(body).digest('hex');
  return {
    'content-type': 'application/json',
    'x-ctxflow-timestamp': String(ts),
    'x-ctxflow-signature': `sha256=${mac}`,
  };
}

interface Counters {
  ops: Record<Kind, number>;
  /** Bytes of the step answers' bodies (what the runtime gets back). */
  stepBytes: number;
  requests: number;
  errors: number;
  /** Feed and app rows the steps delivered. */
  rows: number;
  /** Steps whose answer replaced what the runtime held (request.since 0 although since > 0). */
  replaced: number;
  stepMs: number[];
}

const newCounters = (): Counters => ({
  ops: { turn: 0, webhook: 0, context: 0, step: 0, user: 0 },
  stepBytes: 0,
  requests: 0,
  errors: 0,
  rows: 0,
  replaced: 0,
  stepMs: [],
});

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

    const post = async (url: string, body: string, headers: Record<string, string>, counters: Counters) => {
      counters.requests += 1;
      try {
        const response = await fetch(url, {
          method: 'POST',
          headers,
          body,
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        const text = await response.text();
        if (response.status >= 300) {
          counters.errors += 1;
          noteError(`${new URL(url).pathname}: ${response.status} ${text.slice(0, 300)}`);
          return undefined;
        }
        return text;
      } catch (err) {
        counters.errors += 1;
        noteError(`${new URL(url).pathname}: ${String(err)}`);
        return undefined;
      }
    };
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

    // The counters of the current period; swapped at each sample.
    let counters = newCounters();
    let stopping = false;
    const held = new Map<string, number>(sessions.map((s) => [s, 0]));
    const versions = new Map<string, number>();
    const turn = async (sessionId: string, n: number) => {
      const c = counters;
      const base = `${runner.url}/sessions/${sessionId}`;
      const user = { role: 'user', content: `Question ${n}: is the checkout for carts over 50 items fixed yet?` };
      if ((await post(`${base}/messages`, JSON.stringify(user), json, c)) === undefined) return;
      const since = held.get(sessionId)!;
      const start = performance.now();
      const text = await post(`${base}/steps`, JSON.stringify({ since }), json, c);
      if (text === undefined) return;
      c.stepMs.push(performance.now() - start);
      c.stepBytes += Buffer.byteLength(text);
      const answer = JSON.parse(text) as {
        rows: unknown[];
        request: { messages: unknown[]; since?: number };
        skipped: { reason: string; message: string }[];
      };
      // The feed hook left out of this step (timeout, error): its updates wait for a later step.
      for (const skip of answer.skipped) {
        c.errors += 1;
        noteError(`step ${sessionId}: context skipped: ${skip.reason} ${skip.message}`);
      }
      const appended = answer.request.since ?? 0;
      if (since > 0 && appended === 0) c.replaced += 1;
      held.set(sessionId, appended + answer.request.messages.length);
      c.rows += answer.rows.length;
      const assistant = {
        role: 'assistant',
        content: `Answer ${n}: it is scheduled for the next deploy, see the ticket.`,
      };
      if ((await post(`${base}/messages`, JSON.stringify(assistant), json, c)) === undefined) return;
      c.ops.turn += 1;
    };
    // A step alone (`thirds`): with `since` the messages held from the previous answer, or full.
    const step = async (sessionId: string) => {
      const c = counters;
      const since = preset.since ? held.get(sessionId)! : undefined;
      const start = performance.now();
      const body = JSON.stringify({ requestId: randomUUID(), ...(since === undefined ? {} : { since }) });
      const text = await post(`${runner.url}/sessions/${sessionId}/steps`, body, json, c);
      if (text === undefined) return;
      c.stepMs.push(performance.now() - start);
      c.stepBytes += Buffer.byteLength(text);
      const answer = JSON.parse(text) as {
        rows: unknown[];
        request: { messages: unknown[]; since?: number };
        skipped: { reason: string; message: string }[];
      };
      for (const skip of answer.skipped) {
        c.errors += 1;
        noteError(`step ${sessionId}: context skipped: ${skip.reason} ${skip.message}`);
      }
      const appended = answer.request.since ?? 0;
      if (since !== undefined && since > 0 && appended === 0) c.replaced += 1;
      held.set(sessionId, appended + answer.request.messages.length);
      c.rows += answer.rows.length;
      c.ops.step += 1;
    };
    const userMessage = async (sessionId: string, n: number) => {
      const c = counters;
      const user = { role: 'user', content: `Question ${n}: is the checkout for carts over 50 items fixed yet?` };
      const text = await post(`${runner.url}/sessions/${sessionId}/messages`, JSON.stringify(user), json, c);
      if (text !== undefined) c.ops.user += 1;
    };
    const webhook = async (ticket: string, eventId: string) => {
      const c = counters;
      const version = (versions.get(ticket) ?? 0) + 1;
      versions.set(ticket, version);
      const body = JSON.stringify({
        eventId,
        ticket,
        version,
        summary: `Customer replied (${eventId}): the checkout still fails for carts over 50 items; HAR attached.`,
      });
      if ((await post(`${feed.url}/feeds/generic`, body, signed(secret, body), c)) !== undefined) c.ops.webhook += 1;
    };
    const context = async (sessionId: string, key: string) => {
      const c = counters;
      const body = JSON.stringify({
        sessionId,
        key,
        items: [{ kind: 'notice', content: `Deploy ${key} finished: checkout-service 2.14.1 is live in eu-west.` }],
      });
      if ((await post(`${runner.url}/context`, body, json, c)) !== undefined) c.ops.context += 1;
    };
    const client = async (index: number) => {
      const own = sessions.filter((_, i) => i % CLIENTS === index);
      const ownTickets = tickets.filter((_, i) => i % CLIENTS === index);
      const mix: readonly Kind[] = preset.mix;
      let turns = 0;
      for (let i = 0; !stopping; i++) {
        const kind = mix[i % mix.length]!;
        const id = `${run}-c${index}-${i}`;
        if (kind === 'turn') await turn(own[turns++ % own.length]!, i);
        else if (kind === 'step') await step(own[turns++ % own.length]!);
        else if (kind === 'webhook') await webhook(ownTickets[i % ownTickets.length]!, id);
        else await context(own[i % own.length]!, id);
        if (preset.userEvery > 0 && (i + 1) % preset.userEvery === 0) await userMessage(own[i % own.length]!, i);
      }
    };

    const cpu = () =>
      Object.fromEntries(services.map((s) => [s.name, procCpuMs(s.pid)])) as Record<ServiceName, number>;
    const clients = Array.from({ length: CLIENTS }, (_, i) => client(i));

    progress(
      `soak (${presetName}): ${WARMUP_MS / 1000} s warm-up, then ${options.minutes} measured minutes, sampled every ${preset.periodMs / 1000} s`,
    );
    await sleep(WARMUP_MS);
    const curve: Record<string, unknown>[] = [];
    const rssPeaks = Object.fromEntries(services.map((s) => [s.name, 0])) as Record<ServiceName, number>;
    let cpuBefore = cpu();
    counters = newCounters();
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
      const c = counters;
      counters = newCounters();
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
    stopping = true;
    await Promise.all(clients);

    const logErrors = services.flatMap((s) => s.errorLines.map((line) => `${s.name}: ${line}`));
    const requestErrors = setup.errors + curve.reduce((n, p) => n + (p.errors as number), 0);
    const totalErrors = requestErrors + logErrors.length + (aborted ? 1 : 0);
    // Per minute, from the periods: operations, CPU of each process, returned KiB.
    const minutes = Array.from({ length: Math.ceil(curve.length / perMinute) }, (_, m) => {
      const of = curve.slice(m * perMinute, (m + 1) * perMinute);
      const sum = (f: (p: Record<string, unknown>) => number) => of.reduce((n, p) => n + f(p), 0);
      const kib = sum((p) => p.stepKiB as number);
      const cpuOf = (name: ServiceName) => sum((p) => (p.cpuMs as Record<string, number>)[name]!);
      return {
        ops: sum((p) => p.ops as number),
        kib,
        cpuMsPerOp: Object.fromEntries(
          services.map((s) => [
            s.name,
            round(
              cpuOf(s.name) /
                Math.max(
                  sum((p) => p.ops as number),
                  1,
                ),
              3,
            ),
          ]),
        ),
        runnerCpuMsPerKiB: kib > 0 ? cpuOf('session-runner') / kib : Number.NaN,
        rssMiB: (of.at(-1)?.rssMiB ?? {}) as Record<string, number>,
        whole: of.length === perMinute,
      };
    });
    const complete = curve.length === periods;
    // The load's first minute warms the held sessions and JIT; from the second on, the shape.
    const base = perMinute === 1 ? minutes[0] : minutes[1];
    const last = minutes.at(-1);
    const ratio = base?.ops && last && complete ? last.ops / base.ops : Number.NaN;
    const cpuRatio = base && last && complete ? last.runnerCpuMsPerKiB / base.runnerCpuMsPerKiB : Number.NaN;
    const one = (value: number) => ({
      median: round(value),
      min: round(value),
      max: round(value),
      trials: [round(value)],
    });
    const load = curve.map((p) => p.loadAverage1m as number);
    const shape =
      presetName === 'turns'
        ? 'mix per client: step turn, webhook, step turn, app item'
        : `mix per client: webhook, app item, ${preset.since ? 'delta step (since)' : 'full step'} with a requestId; a user message after every ${preset.userEvery} operations`;
    const setupNote = `preset ${presetName}: ${SESSIONS} sessions (${SESSIONS_PER_TICKET} per ticket), ${CLIENTS} clients back to back, ${shape}; ${WARMUP_MS / 1000} s warm-up, then ${options.minutes} min sampled every ${preset.periodMs / 1000} s`;
    const loadNote = `load average (1 min) per ${preset.periodMs / 1000} s: ${load.join(' ')}`;
    const baseName = perMinute === 1 ? 'the first' : 'the second';
    const results: ScenarioResult[] = [
      {
        id: 'SOAK-throughput',
        title: `Soak (${presetName}), ${options.minutes} min at steady load, heaps capped as deployed`,
        ratioOf: `operations in the last minute / in ${baseName}`,
        goal: preset.since ? THROUGHPUT_GOAL : { op: '>=', value: Number.NaN },
        ratio: one(ratio),
        met: preset.since ? meets(THROUGHPUT_GOAL, ratio) : true,
        // Per 1,000 operations, each process, in the base and the last minute.
        cpuMsPer1k: Object.fromEntries(
          services.flatMap((s) =>
            (
              [
                [`${baseName.slice(4)} minute`, base],
                ['last minute', last],
              ] as const
            ).map(([when, m]) => [`${s.name} ${when}`, round((m?.cpuMsPerOp[s.name] ?? Number.NaN) * 1000, 0)]),
          ),
        ),
        figures: {
          'operations per minute': minutes.map((m) => m.ops).join(' '),
          'session-runner CPU ms/KiB returned per minute': minutes.map((m) => round(m.runnerCpuMsPerKiB, 4)).join(' '),
          'step KiB returned per minute': minutes.map((m) => round(m.kib, 0)).join(' '),
          'step p50 ms first/last period': `${curve[0]?.stepP50Ms}/${curve.at(-1)?.stepP50Ms}`,
          'rows delivered in steps': curve.reduce((n, p) => n + (p.rowsInSteps as number), 0),
        },
        notes: [setupNote, loadNote, ...(aborted ? [`aborted: ${aborted}`] : [])],
        curve,
      },
      ...(preset.since
        ? []
        : [
            {
              id: 'SOAK-cpu-per-kib',
              title: `Soak (${presetName}), session-runner CPU per returned KiB stays flat`,
              ratioOf: `session-runner CPU ms per KiB of step answers, last minute / ${baseName}`,
              goal: CPU_PER_KB_GOAL,
              ratio: one(cpuRatio),
              met: meets(CPU_PER_KB_GOAL, cpuRatio),
              cpuMsPer1k: {},
              figures: {
                'CPU ms/KiB per minute': minutes.map((m) => round(m.runnerCpuMsPerKiB, 4)).join(' '),
              },
            } satisfies ScenarioResult,
          ]),
      ...services.map((s): ScenarioResult => {
        const limit = deployed[s.name].memoryLimitBytes;
        const share = rssPeaks[s.name] / limit;
        return {
          id: `SOAK-rss-${s.name}`,
          title: `Soak (${presetName}), ${s.name} RSS peak within its memory limit`,
          ratioOf: `VmHWM / the Deployment's limits.memory (${limit / 2 ** 20} MiB; 0.88 is 450 MiB of 512)`,
          goal: RSS_GOAL,
          ratio: one(share),
          met: !aborted && meets(RSS_GOAL, share),
          cpuMsPer1k: {},
          figures: {
            NODE_OPTIONS: deployed[s.name].env.NODE_OPTIONS!,
            'RSS MiB per minute': minutes.map((m) => m.rssMiB[s.name]).join(' '),
            ...(perMinute === 1
              ? {}
              : {
                  [`RSS MiB per ${preset.periodMs / 1000} s`]: curve
                    .map((p) => (p.rssMiB as Record<string, number>)[s.name])
                    .join(' '),
                }),
            'peak MiB': round(rssPeaks[s.name] / 2 ** 20, 1),
          },
        };
      }),
      {
        id: 'SOAK-errors',
        title: 'Soak, errors',
        ratioOf: 'non-2xx answers, failed requests, skipped step context, error log lines, exits',
        goal: ERRORS_GOAL,
        ratio: one(totalErrors),
        met: meets(ERRORS_GOAL, totalErrors),
        cpuMsPer1k: {},
        figures: {
          requests: setup.requests + curve.reduce((n, p) => n + (p.requests as number), 0),
          'failed requests and skipped step context': requestErrors,
          'error log lines': logErrors.length,
          exits: aborted ? 1 : 0,
        },
        notes: [...errors, ...logErrors.slice(0, 10)],
      },
    ];
    return results;
  } finally {
    await Promise.allSettled(services.map((s) => s.stop()));
    await cleanup(options.brokers, topicPrefix, Object.values(groups)).catch((err) =>
      progress(`soak: topic clean-up failed: ${String(err)}`),
    );
    await deletePrefix(redis, redisPrefix);
    redis.disconnect();
  }
}

/** Signals `pid` to write a heap snapshot (--heapsnapshot-signal) into `dir` and waits until it is written. */
async function heapSnapshot(pid: number, dir: string): Promise<void> {
  const snapshots = () => new Set(readdirSync(dir).filter((f) => f.endsWith('.heapsnapshot')));
  const before = snapshots();
  progress(`soak: heap snapshot of the session-runner (pid ${pid}) into ${dir}`);
  process.kill(pid, 'SIGUSR2');
  const file = await waitFor(
    'the heap snapshot file',
    () => [...snapshots()].find((f) => !before.has(f)),
    300_000,
    500,
  );
  // Written when its size, once above 0, stops changing.
  let size = 0;
  for (;;) {
    await sleep(2_000);
    const now = statSync(join(dir, file)).size;
    if (now > 0 && now === size) break;
    size = now;
  }
  progress(`soak: heap snapshot ${join(dir, file)} (${round(size / 2 ** 20, 1)} MiB)`);
}

/** Deletes this run's topics and consumer groups. */
async function cleanup(brokers: string[], topicPrefix: string, groups: string[]): Promise<void> {
  const admin = new kafkajs.Kafka({
    clientId: 'ctxflow-bench-soak',
    brokers,
    logLevel: kafkajs.logLevel.NOTHING,
  }).admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const ours = [...existing].filter((t) => t.startsWith(topicPrefix));
    if (ours.length > 0) await admin.deleteTopics({ topics: ours });
    await admin.deleteGroups(groups).catch(() => {});
  } finally {
    await admin.disconnect();
  }
}
