/** A single-node Apache Kafka 4 broker (KRaft) from Maven Central jars on the JDK. */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { kafkaAnswers, tcpConnects } from './probes.ts';
import { isAlive, isZombie, livePid, run, stopPid, waitFor, withLock } from './processes.ts';
import {
  clearMarker,
  type EnsureOptions,
  HOST,
  INFRA_DIR,
  KAFKA_BROKERS,
  KAFKA_CONTROLLER_PORT,
  KAFKA_DIR,
  KAFKA_LIBS,
  KAFKA_LOG,
  KAFKA_LOG4J,
  KAFKA_POM,
  KAFKA_PORT,
  KAFKA_READY_TIMEOUT_MS,
  type KafkaResult,
  kafkaPidFile,
  log,
  markStartedByTests,
} from './settings.ts';

export async function fileHash(path: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(path))
    .digest('hex');
}

/** Copies the broker's jars into .infra/kafka/libs with Maven; skipped while the pom is unchanged. */
/** Fetches the jars once: concurrent callers (test files starting private brokers) wait for the first. */
export function ensureKafkaJars(): Promise<void> {
  return withLock('kafka-jars', fetchKafkaJars);
}

export async function fetchKafkaJars(): Promise<void> {
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

export function kafkaServerProperties(): string {
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
export async function ensureKafkaStorage(propertiesFile: string): Promise<void> {
  if (existsSync(join(KAFKA_DIR, 'data', 'meta.properties'))) return;
  const clusterId = newKafkaClusterId();
  log(`formatting Kafka storage (cluster id ${clusterId})`);
  await formatKafkaNodeStorage(propertiesFile, clusterId);
}

export async function kafkaReady(pid: number): Promise<boolean> {
  if (!isAlive(pid) || isZombie(pid)) {
    throw new Error(`infra: Kafka (pid ${pid}) exited during start; last lines of ${KAFKA_LOG}:\n${tail(KAFKA_LOG)}`);
  }
  const logText = existsSync(KAFKA_LOG) ? readFileSync(KAFKA_LOG, 'utf8') : '';
  return logText.includes('Kafka Server started') && (await tcpConnects(KAFKA_PORT));
}

export function tail(path: string, lines = 30): string {
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
