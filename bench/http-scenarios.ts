/**
 * S3 (`POST /context`), S4 (signed `POST /feeds/generic`; S4b `POST
 * /feeds/incidentio`, Standard Webhooks; S4-pagerduty `POST /feeds/pagerduty`) and S6
 * (OpenTelemetry on over off), each as requests per second over a baseline
 * measured in the same trial on the same server: `POST /bench/hello`, a
 * fastify route of the same embedded app that answers a constant.
 *
 * Every server is a child process (the embedded app, http-server-child.ts);
 * the load generator (autocannon, 10 connections, no pipelining) runs in this
 * process, so on 2 cores each side has one.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { FEED_SCENARIOS, FEED_SECRET, type FeedScenario, NOTICE } from './lib/feed-deliveries.ts';
import { BASELINE_PATH, type ServerProcess, startServerProcess } from './lib/http-server.ts';
import { combine, type LoadRequest, type LoadResult, runLoad } from './lib/load.ts';
import { progress } from './lib/progress.ts';
import { meets, type ScenarioResult } from './lib/report.ts';
import { median, round, summarize } from './lib/stats.ts';

export interface HttpOptions {
  trials: number;
  /** Slices per trial: every route runs once per slice, routes round-robin. */
  slices: number;
  /** Seconds of one route in one slice. */
  sliceSeconds: number;
  warmupSeconds: number;
  connections: number;
  /** Fresh sessions per `POST /context` run with new keys (items per session stay small). */
  sessionsPerRun: number;
  /** Extra node flags for the server processes (e.g. --cpu-prof). */
  serverExecArgv?: string[];
}

const JSON_HEADERS = { 'content-type': 'application/json' };
/** Signed deliveries precomputed per second of a run; a run that uses them all is flagged. */
const SIGNED_PER_SECOND = 60_000;

/**
 * A setup request (outside the timing). A trial longer than the server's
 * keep-alive timeout (72 s) leaves fetch's pooled connection idle past it: the
 * server has closed it when the next trial's setup reuses it, and fetch fails
 * with UND_ERR_SOCKET before the request reached the server. That one is sent
 * again, once.
 */
async function post(server: ServerProcess, path: string, body: unknown): Promise<unknown> {
  const send = () =>
    fetch(`${server.url}${path}`, { method: 'POST', headers: JSON_HEADERS, body: JSON.stringify(body) });
  let response: Response;
  try {
    response = await send();
  } catch (err) {
    if ((err as { cause?: { code?: string } }).cause?.code !== 'UND_ERR_SOCKET') throw err;
    response = await send();
  }
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return response.json();
}

async function createSessions(server: ServerProcess, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) ids.push(((await post(server, '/sessions', {})) as { sessionId: string }).sessionId);
  return ids;
}

/** A body of `POST /context` with a new key, round-robin over `sessions`. */
function newKeyBodies(sessions: string[]): () => string {
  let n = 0;
  return () => {
    const sessionId = sessions[n % sessions.length]!;
    n += 1;
    return JSON.stringify({ sessionId, items: [{ kind: 'notice', content: NOTICE }], key: `k-${n}-${sessionId}` });
  };
}

/** An OTLP receiver that accepts and drops everything (the "on" server exports to it). */
async function startOtlpSink(): Promise<Server> {
  const sink = createServer((request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  sink.listen(0, '127.0.0.1');
  await once(sink, 'listening');
  return sink;
}

interface Variant {
  name: string;
  /** Builds one run's request source; called before the run, outside the timing. */
  prepare(): Promise<{ next: () => LoadRequest; check?: () => string | undefined }>;
  server: ServerProcess;
}

export async function runHttpScenarios(options: HttpOptions): Promise<ScenarioResult[]> {
  const sink = await startOtlpSink();
  const sinkPort = (sink.address() as { port: number }).port;
  const env = { BENCH_FEED_SECRET: FEED_SECRET };
  const plain = await startServerProcess(env, options.serverExecArgv);
  const otel = await startServerProcess(
    {
      ...env,
      BENCH_TELEMETRY: '1',
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sinkPort}`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', // as deployed (docker-compose.yml, deploy/kubernetes)
      OTEL_TRACES_SAMPLER: 'always_on',
      OTEL_METRIC_EXPORT_INTERVAL: '5000',
    },
    options.serverExecArgv,
  );
  try {
    // The replayed key: one key per session, recorded once before the runs.
    const replaySessions = await createSessions(plain, 50);
    const replayBodies = replaySessions.map((sessionId) =>
      JSON.stringify({ sessionId, items: [{ kind: 'notice', content: NOTICE }], key: 'replayed-key' }),
    );
    for (const body of replayBodies) await post(plain, '/context', JSON.parse(body));

    // autocannon stops at its next 1 s sample: a run of 0.5 s lasts 1 s, so size the pool by whole seconds.
    const runSeconds = (seconds: number) => Math.max(1, Math.ceil(seconds));
    const signedCount = Math.ceil(
      SIGNED_PER_SECOND *
        Math.max(options.slices * runSeconds(options.sliceSeconds), runSeconds(options.warmupSeconds)),
    );
    const feedVariant = (feed: FeedScenario, path?: string): Variant => ({
      name: path === undefined ? `POST ${feed.path}` : `hello (${feed.body} body)`,
      server: plain,
      async prepare() {
        const deliveries = feed.deliveries(signedCount);
        const used = deliveries.used;
        return {
          next: path ? () => ({ ...deliveries.next(), path }) : deliveries.next,
          check: () =>
            used !== undefined && used() > signedCount
              ? `used ${used()} of ${signedCount} signed deliveries`
              : undefined,
        };
      },
    });
    const newKeyVariant = (name: string, server: ServerProcess, path: string): Variant => ({
      name,
      server,
      async prepare() {
        const bodies = newKeyBodies(await createSessions(server, options.sessionsPerRun));
        return { next: () => ({ path, headers: JSON_HEADERS, body: bodies() }) };
      },
    });
    const variants: Variant[] = [
      newKeyVariant('hello (context body)', plain, BASELINE_PATH),
      newKeyVariant('POST /context new key', plain, '/context'),
      {
        name: 'POST /context replayed key',
        server: plain,
        async prepare() {
          let n = 0;
          return {
            next: () => ({ path: '/context', headers: JSON_HEADERS, body: replayBodies[n++ % replayBodies.length]! }),
          };
        },
      },
      ...FEED_SCENARIOS.flatMap((feed) => [feedVariant(feed, BASELINE_PATH), feedVariant(feed)]),
      newKeyVariant('POST /context new key, OpenTelemetry on', otel, '/context'),
    ];

    type Source = Awaited<ReturnType<Variant['prepare']>>;
    const runOnce = async (variant: Variant, source: Source, seconds: number): Promise<LoadResult> => {
      const result = await runLoad(variant.server, source.next, { seconds, connections: options.connections });
      const problem = source.check?.();
      if (problem) throw new Error(`${variant.name}: ${problem}; raise SIGNED_PER_SECOND`);
      if (result.failed > 0) throw new Error(`${variant.name}: ${result.failed} failed requests`);
      return result;
    };

    progress(`HTTP: warm-up ${options.warmupSeconds}s per route`);
    for (const variant of variants) await runOnce(variant, await variant.prepare(), options.warmupSeconds);

    // A trial is `slices` rounds of every route for `sliceSeconds` each, so a
    // burst of load from elsewhere on the machine hits every route alike.
    const results = new Map<string, LoadResult[]>(variants.map((v) => [v.name, []]));
    for (let trial = 0; trial < options.trials; trial++) {
      const sources = new Map<string, Source>();
      for (const variant of variants) sources.set(variant.name, await variant.prepare());
      const runs = new Map<string, LoadResult[]>(variants.map((v) => [v.name, []]));
      for (let slice = 0; slice < options.slices; slice++) {
        // Each slice starts one route later: no route always runs first or last.
        const shift = trial * options.slices + slice;
        const order = variants.map((_, i) => variants[(i + shift) % variants.length]!);
        for (const variant of order) {
          runs.get(variant.name)!.push(await runOnce(variant, sources.get(variant.name)!, options.sliceSeconds));
        }
      }
      const line: string[] = [];
      for (const variant of variants) {
        const r = combine(runs.get(variant.name)!);
        results.get(variant.name)!.push(r);
        line.push(`${variant.name} ${Math.round(r.rps)} req/s (server ${r.serverCpuPer1k.toFixed(0)} CPU ms/1k)`);
      }
      progress(`HTTP trial ${trial + 1}/${options.trials}: ${line.join(', ')}`);
    }

    const of = (name: string) => results.get(name)!;
    const ratioTrials = (a: string, b: string) => of(a).map((r, i) => r.rps / of(b)[i]!.rps);
    const med = (name: string, pick: (r: LoadResult) => number) => round(median(of(name).map(pick)), 1);
    const cpu = (...names: [string, string][]) =>
      Object.fromEntries(
        names.flatMap(([label, name]) => [
          [`${label} server`, med(name, (r) => r.serverCpuPer1k)],
          [`${label} client`, med(name, (r) => r.clientCpuPer1k)],
        ]),
      );
    const rps = (label: string, name: string) => [`${label} req/s`, Math.round(median(of(name).map((r) => r.rps)))];
    const scenario = (
      id: string,
      title: string,
      ratioOf: string,
      a: [string, string],
      b: [string, string],
      goal: ScenarioResult['goal'],
      notes: string[] = [],
    ): ScenarioResult => {
      const ratio = summarize(ratioTrials(a[1], b[1]));
      return {
        id,
        title,
        ratioOf,
        goal,
        ratio,
        met: meets(goal, ratio.median),
        cpuMsPer1k: cpu(a, b),
        figures: {
          ...Object.fromEntries([rps(...a), rps(...b)]),
          // Less sensitive to other load on the machine: what the ratio would be if the server's CPU were the only limit.
          'server CPU ratio': round(median(of(b[1]).map((r, i) => r.serverCpuPer1k / of(a[1])[i]!.serverCpuPer1k)), 2),
        },
        notes,
      };
    };
    const setup = `${options.connections} connections, no pipelining, ${options.trials} trials x ${options.slices} slices x ${options.sliceSeconds}s per route, routes round-robin`;
    return [
      scenario(
        'S3a',
        'POST /context, new key each request',
        'req/s over the hello route',
        ['context', 'POST /context new key'],
        ['hello', 'hello (context body)'],
        { op: '>=', value: 0.5 },
        [setup, `${options.sessionsPerRun} fresh sessions per run, round-robin, one notice item per request`],
      ),
      scenario(
        'S3b',
        'POST /context, replayed key',
        'req/s over the hello route',
        ['context', 'POST /context replayed key'],
        ['hello', 'hello (context body)'],
        { op: '>=', value: 0.8 },
        [setup, '50 sessions, each request repeats a recorded key with the same items (recorded: 0)'],
      ),
      ...FEED_SCENARIOS.map((feed) =>
        scenario(
          feed.id,
          feed.title,
          'req/s over the hello route (same signed bodies)',
          ['webhook', `POST ${feed.path}`],
          ['hello', `hello (${feed.body} body)`],
          { op: '>=', value: 0.5 },
          [setup, `${feed.note}; embedded in-memory bus and ledger`],
        ),
      ),
      scenario(
        'S6',
        'OpenTelemetry on over off, POST /context new key',
        'req/s with telemetry over without',
        ['on', 'POST /context new key, OpenTelemetry on'],
        ['off', 'POST /context new key'],
        { op: '>=', value: 0.9 },
        [
          setup,
          'on: startTelemetry + createContextTelemetry, always_on sampler, OTLP http/json (as deployed) to a local sink',
        ],
      ),
    ];
  } finally {
    await Promise.all([plain.stop(), otel.stop()]);
    sink.close();
  }
}
