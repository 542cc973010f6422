/**
 * The soak's processes (bench/soak.ts): what deploy/kubernetes gives each stack service, the
 * service as a child process, its CPU and RSS from /proc, a heap snapshot of it, and the run's
 * topics and consumer groups deleted afterwards.
 */
import { type ChildProcess, execSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import kafkajs from 'kafkajs';
import { parseAllDocuments } from 'yaml';
import { ROOT } from '../../scripts/infra.ts';
import { sleep, waitFor } from '../../test/faults/processes.ts';
import { progress } from './progress.ts';
import { round } from './stats.ts';

export const SERVICES = [
  { name: 'feed-ingestor', entry: 'services/feed-ingestor/src/main.ts', portVar: 'CTXFLOW_FEED_PORT' },
  { name: 'step-context', entry: 'services/step-context/src/main.ts', portVar: 'CTXFLOW_STEP_CONTEXT_PORT' },
  { name: 'session-runner', entry: 'services/session-runner/src/main.ts', portVar: 'CTXFLOW_PORT' },
] as const;
export type ServiceName = (typeof SERVICES)[number]['name'];

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
export function procCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields from the 3rd (state) on: utime is the 14th, stime the 15th.
  return ((Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_S) * 1000;
}

/** VmRSS and VmHWM (the peak) of a process in bytes, from /proc/<pid>/status. */
export function procRss(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rss: kb('VmRSS') * 1024, hwm: kb('VmHWM') * 1024 };
}

/** A service process; its stdout (pino JSON) is scanned for error and fatal lines only. */
export class Service {
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

/** Signals `pid` to write a heap snapshot (--heapsnapshot-signal) into `dir` and waits until it is written. */
export async function heapSnapshot(pid: number, dir: string): Promise<void> {
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
export async function cleanup(brokers: string[], topicPrefix: string, groups: string[]): Promise<void> {
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
