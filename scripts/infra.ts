/**
 * Local service provisioning without containers: a single-node Apache Kafka 4 broker
 * (KRaft) from Maven Central jars on the machine's JDK, Redis on 6379, and a
 * three-node Redis Cluster, all on 127.0.0.1.
 *
 * CLI:
 *   node scripts/infra.ts up [--redis-cluster]   start what is missing, print KEY=value lines on stdout
 *   node scripts/infra.ts down                   stop what `up` (or a test run) started, wait until gone
 *
 * Data, logs and pid files live in `.infra/` at the repository root (gitignored). A service
 * counts as "ours" only when this checkout's `.infra` holds its pid file; `down` never
 * touches anything else (e.g. the machine's own Redis on 6379, or a broker started from
 * another checkout, which `up` simply reuses). The ports are machine-wide, so the per-service
 * locks and the leases of test runs live in a machine-wide folder (STATE_DIR).
 *
 * Test runs (test/setup/services.ts) take a lease and start services with `forTests`; the
 * last test run on the machine to release its lease stops what test runs started, while
 * services started by `infra:up` keep running until `infra:down`.
 *
 * Progress goes to stderr; stdout carries only the KEY=value lines.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const INFRA_DIR = join(ROOT, '.infra');

export const HOST = '127.0.0.1';
export const KAFKA_PORT = 19092;
export const KAFKA_CONTROLLER_PORT = 19093;
export const REDIS_PORT = 6379;
export const REDIS_CLUSTER_PORTS: readonly number[] = [17001, 17002, 17003];

export const KAFKA_BROKERS = `${HOST}:${KAFKA_PORT}`;
export const REDIS_URL = `redis://${HOST}:${REDIS_PORT}`;

const KAFKA_DIR = join(INFRA_DIR, 'kafka');
const KAFKA_LIBS = join(KAFKA_DIR, 'libs');
const KAFKA_POM = join(ROOT, 'deploy/local/kafka/pom.xml');
const KAFKA_LOG4J = join(ROOT, 'deploy/local/kafka/log4j2.properties');
const KAFKA_LOG = join(KAFKA_DIR, 'server.log');
const REDIS_DIR = join(INFRA_DIR, 'redis');
const CLUSTER_DIR = join(INFRA_DIR, 'redis-cluster');
/** Pid files, in this checkout's .infra or in another checkout's (`dir`). */
const kafkaPidFile = (dir = INFRA_DIR) => join(dir, 'kafka', 'kafka.pid');
const redisPidFile = (dir = INFRA_DIR) => join(dir, 'redis', 'redis.pid');
const clusterPidFile = (port: number, dir = INFRA_DIR) => join(dir, 'redis-cluster', String(port), 'redis.pid');

/**
 * Machine-wide coordination. The ports are machine-wide, so the locks, the leases of test
 * runs and the "started by a test run" markers are too: a clone in /tmp and the main
 * checkout share one broker without pulling it from under each other.
 */
export const STATE_DIR = process.env.CTXFLOW_INFRA_STATE_DIR || join(tmpdir(), 'ctxflow-infra');
const LOCKS_DIR = join(STATE_DIR, 'locks');
const LEASES_DIR = join(STATE_DIR, 'leases');
const MARKERS_DIR = join(STATE_DIR, 'started-by-tests');

export const SERVICE_NAMES = ['kafka', 'redis', 'redisCluster'] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

/** Records that a test run started `name` from this checkout; the last test run out stops it. */
async function markStartedByTests(name: ServiceName): Promise<void> {
  await mkdir(MARKERS_DIR, { recursive: true });
  await writeFile(join(MARKERS_DIR, name), INFRA_DIR);
}

/** The .infra dir of the checkout whose test run started `name`, if one did. */
async function markerOwner(name: ServiceName): Promise<string | undefined> {
  try {
    return (await readFile(join(MARKERS_DIR, name), 'utf8')) || undefined;
  } catch {
    return undefined;
  }
}

/** Drops the marker: always (`owner` undefined), or only when `owner` holds it. */
async function clearMarker(name: ServiceName, owner?: string): Promise<void> {
  if (owner === undefined || (await markerOwner(name)) === owner) await rm(join(MARKERS_DIR, name), { force: true });
}

const KAFKA_READY_TIMEOUT_MS = 120_000;
const REDIS_READY_TIMEOUT_MS = 30_000;
const CLUSTER_READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;
/** A cold start downloads the Kafka jars while holding the lock: waiters must outlast that. */
const LOCK_TIMEOUT_MS = 600_000;

export interface EnsureResult {
  /** True when this call started the service; false when it was already answering. */
  started: boolean;
}
export interface KafkaResult extends EnsureResult {
  brokers: string;
}
export interface RedisResult extends EnsureResult {
  url: string;
}
export interface RedisClusterResult extends EnsureResult {
  /** `host:port` of every master, e.g. `127.0.0.1:17001`. */
  nodes: string[];
}
export interface EnsureOptions {
  /** Mark what this call starts as owned by test runs (see {@link releaseTestLease}). */
  forTests?: boolean;
}

function log(message: string): void {
  process.stderr.write(`[infra] ${message}\n`);
}

const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

// ---------------------------------------------------------------------------
// Processes, pid files, locks

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Command line of a live process, '' when gone (Linux /proc). */
function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

/** Pid from a pid file when that process is alive and its command line contains `expect`; else undefined. */
async function livePid(pidFile: string, expect: string): Promise<number | undefined> {
  let text: string;
  try {
    text = await readFile(pidFile, 'utf8');
  } catch {
    return undefined;
  }
  const pid = Number.parseInt(text.trim(), 10);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  if (!isAlive(pid) || !commandLine(pid).includes(expect)) return undefined;
  return pid;
}

/** SIGTERM, then SIGKILL after `timeoutMs`; resolves once the process is gone. */
async function stopPid(pid: number, what: string, timeoutMs = STOP_TIMEOUT_MS): Promise<void> {
  if (!isAlive(pid)) return;
  log(`stopping ${what} (pid ${pid})`);
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return;
  }
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid) && !isZombie(pid)) {
    if (Date.now() > deadline) {
      log(`${what} (pid ${pid}) ignored SIGTERM for ${timeoutMs} ms: SIGKILL`);
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        return;
      }
      await sleep(200);
      return;
    }
    await sleep(100);
  }
}

/** A zombie has exited but waits for its parent to reap it: gone for our purposes. */
function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
}

/**
 * Runs `fn` holding the lock `name`: a directory made atomically with mkdir, holding
 * the owner's pid. A lock whose owner died is taken over.
 */
async function withLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
  await mkdir(LOCKS_DIR, { recursive: true });
  const dir = join(LOCKS_DIR, name);
  const deadline = Date.now() + LOCK_TIMEOUT_MS;
  let waited = false;
  for (;;) {
    try {
      await mkdir(dir);
      await writeFile(join(dir, 'owner'), String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (await lockIsStale(dir)) {
        await rm(dir, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline)
        throw new Error(`infra: timed out after ${LOCK_TIMEOUT_MS} ms waiting for lock ${dir}`);
      if (!waited) log(`waiting for lock ${name} (held by another process)`);
      waited = true;
      await sleep(200);
    }
  }
  try {
    return await fn();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function lockIsStale(dir: string): Promise<boolean> {
  try {
    const owner = Number.parseInt(await readFile(join(dir, 'owner'), 'utf8'), 10);
    return !Number.isInteger(owner) || !isAlive(owner);
  } catch {
    // Owner file not written yet, or the lock vanished: stale only if it has been like that for a while.
    try {
      return Date.now() - (await stat(dir)).mtimeMs > 10_000;
    } catch {
      return false;
    }
  }
}

// ---------------------------------------------------------------------------
// Probes

/** Resolves true when a TCP connection to host:port succeeds within `timeoutMs`. */
export function tcpConnects(port: number, host = HOST, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((done) => {
    const socket = createConnection({ host, port });
    const finish = (ok: boolean) => {
      socket.destroy();
      done(ok);
    };
    socket.setTimeout(timeoutMs, () => finish(false));
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}

/**
 * Whether a Kafka broker answers a metadata request, asked through kafkajs (one try, short
 * timeouts, its logs silenced: a broker still starting is an expected answer here).
 */
export async function kafkaAnswers(port = KAFKA_PORT, host = HOST): Promise<boolean> {
  const { Kafka, logLevel } = (await import('kafkajs')).default;
  const admin = new Kafka({
    clientId: 'ctxflow-infra',
    brokers: [`${host}:${port}`],
    connectionTimeout: 1_000,
    requestTimeout: 2_000,
    retry: { retries: 0 },
    logLevel: logLevel.NOTHING,
  }).admin();
  try {
    await admin.connect();
    return (await admin.describeCluster()).brokers.length > 0;
  } catch {
    return false;
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

/**
 * Sends one Redis command through ioredis (no retries, no offline queue) and returns its
 * reply as text; an error reply rejects.
 */
export async function redisCommand(port: number, args: readonly string[], host = HOST): Promise<string> {
  const { Redis } = await import('ioredis');
  const client = new Redis({
    host,
    port,
    lazyConnect: true,
    connectTimeout: 2_000,
    commandTimeout: 2_000,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    const [command, ...rest] = args;
    const reply = await client.call(command!, ...rest);
    return reply === null ? '' : String(reply);
  } catch (err) {
    throw new Error(`redis ${host}:${port} ${args[0]}: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    client.disconnect();
  }
}

export async function redisAnswers(port = REDIS_PORT, host = HOST): Promise<boolean> {
  try {
    return (await redisCommand(port, ['PING'], host)) === 'PONG';
  } catch {
    return false;
  }
}

async function clusterStateOk(port: number): Promise<boolean> {
  try {
    return (await redisCommand(port, ['CLUSTER', 'INFO'])).includes('cluster_state:ok');
  } catch {
    return false;
  }
}

async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`infra: ${what} not ready after ${timeoutMs} ms`);
    await sleep(150);
  }
}

/**
 * Runs a command to completion without blocking the event loop (the services are provisioned
 * concurrently: a synchronous Maven run would stall the other readiness checks).
 */
function run(command: string, args: readonly string[], what: string): Promise<string> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.once('error', (err) => fail(new Error(`infra: ${what}: cannot run ${command}: ${err.message}`)));
    child.once('close', (code, signal) => {
      if (code === 0) done(output);
      else {
        fail(
          new Error(
            `infra: ${what} failed (${signal ?? `exit ${code}`}): ${command} ${args.join(' ')}\n${output.slice(-4000)}`,
          ),
        );
      }
    });
  });
}

// ---------------------------------------------------------------------------
// Kafka

async function fileHash(path: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(path))
    .digest('hex');
}

/** Copies the broker's jars into .infra/kafka/libs with Maven; skipped while the pom is unchanged. */
/** Fetches the jars once: concurrent callers (test files starting private brokers) wait for the first. */
function ensureKafkaJars(): Promise<void> {
  return withLock('kafka-jars', fetchKafkaJars);
}

async function fetchKafkaJars(): Promise<void> {
  const stamp = join(KAFKA_LIBS, '.pom-sha256');
  const wanted = await fileHash(KAFKA_POM);
  if (existsSync(stamp) && (await readFile(stamp, 'utf8')) === wanted) return;
  log('fetching Kafka jars with Maven (cached in ~/.m2 after the first time)');
  const started = Date.now();
  await rm(KAFKA_LIBS, { recursive: true, force: true });
  await run(
    'mvn',
    ['-q', '-B', '-f', KAFKA_POM, 'dependency:copy-dependencies', `-DoutputDirectory=${KAFKA_LIBS}`],
    'fetching the Kafka jars',
  );
  // The SLF4J binding must be the same Log4j release as log4j-core, or the broker logs nothing.
  const jars = readdirSync(KAFKA_LIBS);
  const version = (artifact: string) =>
    jars.find((jar) => jar.startsWith(`${artifact}-2.`))?.slice(artifact.length + 1, -'.jar'.length);
  const core = version('log4j-core');
  const binding = version('log4j-slf4j-impl');
  if (!core || core !== binding) {
    throw new Error(
      `infra: log4j-core ${core} and log4j-slf4j-impl ${binding} differ: set log4j.version in ${KAFKA_POM}`,
    );
  }
  await writeFile(stamp, wanted);
  log(`Kafka jars ready in ${Date.now() - started} ms`);
}

function kafkaServerProperties(): string {
  return kafkaNodeProperties({
    nodeId: 1,
    port: KAFKA_PORT,
    controllerPort: KAFKA_CONTROLLER_PORT,
    voters: `1@${HOST}:${KAFKA_CONTROLLER_PORT}`,
    dataDir: join(KAFKA_DIR, 'data'),
  });
}

/** One KRaft node (broker and controller) on loopback; see {@link kafkaNodeProperties}. */
export interface KafkaNodeConfig {
  nodeId: number;
  port: number;
  controllerPort: number;
  /** `controller.quorum.voters`: `<id>@127.0.0.1:<controllerPort>` of every node, comma-separated. */
  voters: string;
  dataDir: string;
  /**
   * Replicas of the internal and new topics (default 1, a single node), and the
   * `min.insync.replicas` of acks=all writes (default 1).
   */
  replicationFactor?: number;
  minInsyncReplicas?: number;
  /**
   * A second client listener, `PROXIED`, on `port` that advertises
   * `127.0.0.1:<advertisedPort>` (a TCP proxy forwarding to `port`): a client
   * bootstrapped through the proxy is told to reach the broker through it, so
   * every byte it exchanges goes through the proxy. Inter-broker traffic and
   * clients of the PLAINTEXT listener stay direct.
   */
  proxiedListener?: { port: number; advertisedPort: number };
  /**
   * More client listeners, each advertised on its own port, e.g.
   * `{ name: 'SASL_SSL', protocol: 'SASL_SSL', port }` (their settings go in `extra`).
   */
  listeners?: readonly { name: string; protocol: string; port: number }[];
  /** More `key=value` lines, appended. */
  extra?: readonly string[];
}

/** The server.properties of one node: the shared broker's, or a test's private broker or cluster node. */
export function kafkaNodeProperties(node: KafkaNodeConfig): string {
  const replicas = node.replicationFactor ?? 1;
  const minIsr = node.minInsyncReplicas ?? 1;
  const proxied = node.proxiedListener;
  const more = node.listeners ?? [];
  const moreListeners = more.map((l) => `,${l.name}://${HOST}:${l.port}`).join('');
  const moreProtocols = more.map((l) => `,${l.name}:${l.protocol}`).join('');
  return [
    '# Written by scripts/infra.ts on every start: edit that file, not this one.',
    'process.roles=broker,controller',
    `node.id=${node.nodeId}`,
    `controller.quorum.voters=${node.voters}`,
    `listeners=PLAINTEXT://${HOST}:${node.port},CONTROLLER://${HOST}:${node.controllerPort}` +
      (proxied ? `,PROXIED://${HOST}:${proxied.port}` : '') +
      moreListeners,
    `advertised.listeners=PLAINTEXT://${HOST}:${node.port}` +
      (proxied ? `,PROXIED://${HOST}:${proxied.advertisedPort}` : '') +
      moreListeners,
    'controller.listener.names=CONTROLLER',
    'inter.broker.listener.name=PLAINTEXT',
    `listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT${proxied ? ',PROXIED:PLAINTEXT' : ''}${moreProtocols}`,
    `log.dirs=${node.dataDir}`,
    // One broker: the internal topics can have one replica only, else "group coordinator not available".
    `offsets.topic.replication.factor=${replicas}`,
    'offsets.topic.num.partitions=4',
    `transaction.state.log.replication.factor=${replicas}`,
    `transaction.state.log.min.isr=${minIsr}`,
    `share.coordinator.state.topic.replication.factor=${replicas}`,
    `share.coordinator.state.topic.min.isr=${minIsr}`,
    'group.initial.rebalance.delay.ms=0',
    'auto.create.topics.enable=true',
    'num.partitions=4',
    'delete.topic.enable=true',
    ...(replicas > 1 ? [`default.replication.factor=${replicas}`, `min.insync.replicas=${minIsr}`] : []),
    ...(node.extra ?? []),
    '',
  ].join('\n');
}

/**
 * The jars of the broker (fetched into .infra/kafka/libs by Maven if missing) and the
 * java arguments that run one node from them with `propertiesFile`.
 */
export async function kafkaNodeCommand(
  propertiesFile: string,
  heap = '1g',
  jvmFlags: readonly string[] = [],
): Promise<string[]> {
  await mkdir(KAFKA_DIR, { recursive: true });
  await ensureKafkaJars();
  return [
    '-Xms256m',
    `-Xmx${heap}`,
    '-XX:+UseG1GC',
    ...jvmFlags,
    '-Djava.awt.headless=true',
    `-Dlog4j2.configurationFile=${KAFKA_LOG4J}`,
    '-cp',
    `${KAFKA_LIBS}/*`,
    'kafka.Kafka',
    propertiesFile,
  ];
}

/**
 * Formats a node's KRaft storage with `clusterId` (see newKafkaClusterId);
 * `extraArgs` go to the format command (e.g. `--add-scram` for SCRAM users).
 */
export async function formatKafkaNodeStorage(
  propertiesFile: string,
  clusterId: string,
  extraArgs: readonly string[] = [],
): Promise<void> {
  await ensureKafkaJars();
  await run(
    'java',
    [
      `-Dlog4j2.configurationFile=${KAFKA_LOG4J}`,
      '-cp',
      `${KAFKA_LIBS}/*`,
      'kafka.tools.StorageTool',
      'format',
      '-t',
      clusterId,
      '-c',
      propertiesFile,
      ...extraArgs,
    ],
    'formatting the Kafka storage',
  );
}

/**
 * A cluster id as `kafka-storage random-uuid` prints it: 16 random bytes in URL-safe
 * base64 without padding, drawn again when it starts with `-` (as Kafka's Uuid does:
 * the tools would read such an id as an option).
 */
export function newKafkaClusterId(): string {
  for (;;) {
    const id = randomBytes(16).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

/** Formats the KRaft storage once (the data dir then holds meta.properties). */
async function ensureKafkaStorage(propertiesFile: string): Promise<void> {
  if (existsSync(join(KAFKA_DIR, 'data', 'meta.properties'))) return;
  const clusterId = newKafkaClusterId();
  log(`formatting Kafka storage (cluster id ${clusterId})`);
  await formatKafkaNodeStorage(propertiesFile, clusterId);
}

async function kafkaReady(pid: number): Promise<boolean> {
  if (!isAlive(pid) || isZombie(pid)) {
    throw new Error(`infra: Kafka (pid ${pid}) exited during start; last lines of ${KAFKA_LOG}:\n${tail(KAFKA_LOG)}`);
  }
  const logText = existsSync(KAFKA_LOG) ? readFileSync(KAFKA_LOG, 'utf8') : '';
  return logText.includes('Kafka Server started') && (await tcpConnects(KAFKA_PORT));
}

function tail(path: string, lines = 30): string {
  try {
    return readFileSync(path, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * Makes sure a Kafka broker answers on 127.0.0.1:19092: ours (pid file), or any Kafka
 * already listening there; else starts one from the Maven jars, detached, and waits
 * until its log says `Kafka Server started` and the port accepts connections.
 */
export async function ensureKafka(options: EnsureOptions = {}): Promise<KafkaResult> {
  return withLock('kafka', async () => {
    const ours = await livePid(kafkaPidFile(), 'kafka.Kafka');
    if (ours !== undefined) {
      await waitFor('Kafka', KAFKA_READY_TIMEOUT_MS, () => kafkaReady(ours));
      if (!options.forTests) await clearMarker('kafka');
      return { brokers: KAFKA_BROKERS, started: false };
    }
    if (await tcpConnects(KAFKA_PORT)) {
      if (await kafkaAnswers()) {
        log(`using the Kafka broker already listening on ${KAFKA_BROKERS} (not started from this checkout)`);
        if (!options.forTests) await clearMarker('kafka');
        return { brokers: KAFKA_BROKERS, started: false };
      }
      throw new Error(`infra: port ${KAFKA_PORT} is taken by something that does not answer as Kafka`);
    }

    const begin = Date.now();
    await mkdir(KAFKA_DIR, { recursive: true });
    await ensureKafkaJars();
    const propertiesFile = join(KAFKA_DIR, 'server.properties');
    await writeFile(propertiesFile, kafkaServerProperties());
    await ensureKafkaStorage(propertiesFile);

    log(`starting Kafka on ${KAFKA_BROKERS} (controller ${HOST}:${KAFKA_CONTROLLER_PORT}), log ${KAFKA_LOG}`);
    const out = openSync(KAFKA_LOG, 'w');
    const child = spawn(
      'java',
      [
        '-Xms256m',
        '-Xmx1g',
        '-XX:+UseG1GC',
        '-Djava.awt.headless=true',
        `-Dlog4j2.configurationFile=${KAFKA_LOG4J}`,
        '-cp',
        `${KAFKA_LIBS}/*`,
        'kafka.Kafka',
        propertiesFile,
      ],
      { cwd: KAFKA_DIR, detached: true, stdio: ['ignore', out, out] },
    );
    closeSync(out);
    child.unref();
    const pid = child.pid;
    if (pid === undefined) throw new Error('infra: could not start java for Kafka');
    await writeFile(kafkaPidFile(), String(pid));
    if (options.forTests) await markStartedByTests('kafka');
    await waitFor('Kafka', KAFKA_READY_TIMEOUT_MS, () => kafkaReady(pid));
    log(`Kafka ready in ${Date.now() - begin} ms (pid ${pid})`);
    return { brokers: KAFKA_BROKERS, started: true };
  });
}

/**
 * Stops the Kafka broker that `ensureKafka` started from the checkout whose .infra is
 * `infraDir` (its pid file); returns whether one was running.
 */
export async function stopKafka(infraDir = INFRA_DIR): Promise<boolean> {
  return withLock('kafka', async () => {
    const pid = await livePid(kafkaPidFile(infraDir), 'kafka.Kafka');
    if (pid !== undefined) await stopPid(pid, 'Kafka');
    await rm(kafkaPidFile(infraDir), { force: true });
    await clearMarker('kafka', infraDir);
    return pid !== undefined;
  });
}

// ---------------------------------------------------------------------------
// Redis

interface RedisServerOptions {
  port: number;
  dir: string;
  pidFile: string;
  extra?: readonly string[];
}

/** Starts a daemonized redis-server with no persistence, bound to loopback. */
async function startRedisServer({ port, dir, pidFile, extra = [] }: RedisServerOptions): Promise<void> {
  await mkdir(dir, { recursive: true });
  await rm(pidFile, { force: true });
  await run(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      HOST,
      '--daemonize',
      'yes',
      '--pidfile',
      pidFile,
      '--dir',
      dir,
      '--logfile',
      join(dir, 'redis.log'),
      '--save',
      '',
      '--appendonly',
      'no',
      ...extra,
    ],
    `starting redis-server on ${port}`,
  );
}

/** Uses the Redis on 127.0.0.1:6379 when it answers PING, else starts one there. */
export async function ensureRedis(options: EnsureOptions = {}): Promise<RedisResult> {
  return withLock('redis', async () => {
    if (await redisAnswers()) {
      if (!options.forTests) await clearMarker('redis');
      return { url: REDIS_URL, started: false };
    }
    const begin = Date.now();
    log(`starting redis-server on ${HOST}:${REDIS_PORT}`);
    await startRedisServer({ port: REDIS_PORT, dir: REDIS_DIR, pidFile: redisPidFile() });
    if (options.forTests) await markStartedByTests('redis');
    await waitFor(`Redis on ${REDIS_PORT}`, REDIS_READY_TIMEOUT_MS, () => redisAnswers());
    log(`Redis ready in ${Date.now() - begin} ms`);
    return { url: REDIS_URL, started: true };
  });
}

/** Stops the Redis that `ensureRedis` started from the checkout of `infraDir` (pid file); never the machine's own. */
export async function stopRedis(infraDir = INFRA_DIR): Promise<boolean> {
  return withLock('redis', async () => {
    const pid = await livePid(redisPidFile(infraDir), 'redis-server');
    if (pid !== undefined) await stopPid(pid, 'Redis');
    await rm(redisPidFile(infraDir), { force: true });
    await clearMarker('redis', infraDir);
    return pid !== undefined;
  });
}

// ---------------------------------------------------------------------------
// Redis Cluster

export interface RedisClusterOptions extends EnsureOptions {
  ports?: readonly number[];
}

const clusterNodeDir = (port: number) => join(CLUSTER_DIR, String(port));

/**
 * Makes sure a Redis Cluster of one master per port (default 17001-17003, cluster bus on
 * port + 10000) answers with `cluster_state:ok`. A healthy cluster already there is reused;
 * otherwise our nodes are stopped, their nodes files wiped, and a fresh cluster is created.
 */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisClusterResult> {
  const ports = options.ports ?? REDIS_CLUSTER_PORTS;
  const nodes = ports.map((port) => `${HOST}:${port}`);
  return withLock('redis-cluster', async () => {
    const healthy = await Promise.all(ports.map((port) => clusterStateOk(port)));
    if (healthy.every(Boolean)) {
      if (!options.forTests) await clearMarker('redisCluster');
      return { nodes, started: false };
    }
    const begin = Date.now();
    await stopClusterNodes(ports);
    for (const port of ports) {
      if (await tcpConnects(port)) throw new Error(`infra: port ${port} is taken by a process not started here`);
      if (await tcpConnects(port + 10_000)) throw new Error(`infra: cluster bus port ${port + 10_000} is taken`);
    }
    log(`starting a Redis Cluster on ${nodes.join(',')}`);
    await mkdir(CLUSTER_DIR, { recursive: true });
    for (const port of ports) {
      const dir = clusterNodeDir(port);
      await rm(dir, { recursive: true, force: true });
      await startRedisServer({
        port,
        dir,
        pidFile: clusterPidFile(port),
        extra: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '5000'],
      });
    }
    if (options.forTests) await markStartedByTests('redisCluster');
    for (const port of ports) await waitFor(`Redis node ${port}`, REDIS_READY_TIMEOUT_MS, () => redisAnswers(port));
    await run(
      'redis-cli',
      ['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'],
      'creating the Redis Cluster',
    );
    await waitFor('Redis Cluster', CLUSTER_READY_TIMEOUT_MS, async () =>
      (await Promise.all(ports.map((port) => clusterStateOk(port)))).every(Boolean),
    );
    log(`Redis Cluster ready in ${Date.now() - begin} ms`);
    return { nodes, started: true };
  });
}

async function stopClusterNodes(ports: readonly number[], infraDir = INFRA_DIR): Promise<boolean> {
  let stopped = false;
  for (const port of ports) {
    const pid = await livePid(clusterPidFile(port, infraDir), 'redis-server');
    if (pid !== undefined) {
      await stopPid(pid, `Redis Cluster node ${port}`);
      stopped = true;
    }
    await rm(clusterPidFile(port, infraDir), { force: true });
  }
  return stopped;
}

/** Stops the cluster nodes that `startRedisCluster` started from the checkout of `infraDir` (pid files). */
export async function stopRedisCluster(
  options: { ports?: readonly number[]; infraDir?: string } = {},
): Promise<boolean> {
  const infraDir = options.infraDir ?? INFRA_DIR;
  return withLock('redis-cluster', async () => {
    const ports = options.ports ?? clusterPortsOnDisk(infraDir);
    const stopped = await stopClusterNodes(ports, infraDir);
    await clearMarker('redisCluster', infraDir);
    return stopped;
  });
}

/** Ports of every cluster node directory in an .infra (covers clusters started on non-default ports). */
function clusterPortsOnDisk(infraDir: string): number[] {
  try {
    return readdirSync(join(infraDir, 'redis-cluster'))
      .map((name) => Number.parseInt(name, 10))
      .filter((port) => Number.isInteger(port));
  } catch {
    return [];
  }
}

// ---------------------------------------------------------------------------
// Everything, and leases for concurrent test runs

/** Stops everything that this checkout's `.infra` started; the machine's own services are untouched. */
export async function stopInfra(): Promise<void> {
  await Promise.all([stopKafka(), stopRedis(), stopRedisCluster()]);
}

const STOPPERS: Record<ServiceName, (infraDir: string) => Promise<boolean>> = {
  kafka: stopKafka,
  redis: stopRedis,
  redisCluster: (infraDir) => stopRedisCluster({ infraDir }),
};

/**
 * Registers a test run (by pid) as a user of the local services. Call before the
 * `ensure*` functions with `forTests: true`, and pair with {@link releaseTestLease}.
 */
export async function acquireTestLease(): Promise<void> {
  await withLock('leases', async () => {
    await mkdir(LEASES_DIR, { recursive: true });
    await writeFile(join(LEASES_DIR, String(process.pid)), '');
  });
}

/**
 * Ends this run's lease. When no other live test run holds one, stops every service
 * that a test run started (`forTests`), so concurrent runs in one checkout never pull
 * a broker from under each other; services started by `infra:up` are left running.
 * Returns the services it stopped.
 */
export async function releaseTestLease(): Promise<ServiceName[]> {
  return withLock('leases', async () => {
    await rm(join(LEASES_DIR, String(process.pid)), { force: true });
    let others: string[] = [];
    try {
      others = readdirSync(LEASES_DIR);
    } catch {}
    const live = others.filter((name) => {
      const pid = Number.parseInt(name, 10);
      if (Number.isInteger(pid) && isAlive(pid)) return true;
      rm(join(LEASES_DIR, name), { force: true }).catch(() => {});
      return false;
    });
    if (live.length > 0) {
      log(`leaving test services running for ${live.length} other test run(s)`);
      return [];
    }
    const stopped: ServiceName[] = [];
    for (const name of SERVICE_NAMES) {
      const owner = await markerOwner(name);
      if (owner !== undefined && (await STOPPERS[name](owner))) stopped.push(name);
    }
    return stopped;
  });
}

// ---------------------------------------------------------------------------
// CLI

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...flags] = argv;
  const unknown = flags.filter((flag) => flag !== '--redis-cluster');
  if (unknown.length > 0 || (command !== 'up' && command !== 'down')) {
    process.stderr.write('usage: node scripts/infra.ts up [--redis-cluster] | down\n');
    return 2;
  }
  if (command === 'down') {
    await stopInfra();
    log('down');
    return 0;
  }
  const withCluster = flags.includes('--redis-cluster');
  const [kafka, redis, cluster] = await Promise.all([
    ensureKafka(),
    ensureRedis(),
    withCluster ? startRedisCluster() : Promise.resolve(undefined),
  ]);
  process.stdout.write(`KAFKA_BROKERS=${kafka.brokers}\n`);
  process.stdout.write(`REDIS_URL=${redis.url}\n`);
  if (cluster) process.stdout.write(`REDIS_CLUSTER_NODES=${cluster.nodes.join(',')}\n`);
  return 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
