/**
 * Vitest global setup: gives the tests a Kafka broker, a Redis and a Redis Cluster.
 *
 * Each service is chosen in this order:
 *   1. the environment: KAFKA_BROKERS, REDIS_URL, REDIS_CLUSTER_NODES (comma-separated host:port);
 *   2. testcontainers, when a container runtime answers within CONTAINER_PROBE_TIMEOUT_MS;
 *   3. the project's own provisioning in scripts/infra.ts (Kafka from Maven jars on the JDK,
 *      Redis on 6379 or a redis-server it starts, a three-node cluster on 17001-17003).
 * `CTXFLOW_TEST_SERVICES=local` or `=containers` forces step 2 or 3 (no fallback).
 *
 * Laziness rule: services are provisioned only when at least one selected test file lives
 * under test/contract/ or test/conformance/, or reaches test/support/services.ts through its
 * relative imports (directly or via a helper in test/ or in a package's test/).
 * A run of unit tests only starts nothing (addresses from the environment are still passed on).
 *
 * The addresses reach tests through `provide`/`inject` (see test/support/services.ts) and
 * through process.env, which the worker processes inherit. Teardown stops only what this
 * setup started; local services are shared between concurrent runs in one checkout through
 * leases (scripts/infra.ts), so the last run out stops them.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, relative, resolve, sep } from 'node:path';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Comma-separated `host:port` bootstrap list, or null when no broker was provisioned. */
    kafkaBrokers: string | null;
    /** `redis://host:port`, or null. */
    redisUrl: string | null;
    /** Comma-separated `host:port` of the cluster's nodes, or null. */
    redisClusterNodes: string | null;
  }
}

const CONTAINER_PROBE_TIMEOUT_MS = 5_000;
/** Image tags for the container path; override with KAFKA_IMAGE / REDIS_IMAGE. */
const KAFKA_IMAGE = process.env.KAFKA_IMAGE ?? 'apache/kafka:4.0.0';
const REDIS_IMAGE = process.env.REDIS_IMAGE ?? 'redis:7.0.15';

type Stop = () => Promise<unknown>;

interface Addresses {
  kafkaBrokers: string | null;
  redisUrl: string | null;
  redisClusterNodes: string | null;
}

function note(message: string): void {
  process.stderr.write(`[test services] ${message}\n`);
}

/**
 * True when any selected file lives in a folder whose tests need services, or reaches
 * test/support/services.ts through its relative imports (followed within test/ and the
 * packages' test/ folders, so a shared harness that calls requireRedis() counts for every
 * file that imports it).
 */
export function needsServices(root: string, files: readonly string[]): boolean {
  // An empty list means the selection could not be read: provision rather than fail later.
  if (files.length === 0) return true;
  const testDir = resolve(root, 'test');
  const helper = resolve(testDir, 'support/services.ts');
  const visited = new Set<string>();
  const isTestFile = (file: string) =>
    file.startsWith(testDir + sep) ||
    /^(services|shared|clients)\/[^/]+\/test\//.test(relative(root, file).split(sep).join('/'));
  const reachesHelper = (file: string): boolean => {
    if (file === helper) return true;
    if (visited.has(file) || !isTestFile(file)) return false;
    visited.add(file);
    let source: string;
    try {
      source = readFileSync(file, 'utf8');
    } catch {
      return false;
    }
    // Relative specifiers of static imports, re-exports and dynamic imports.
    for (const match of source.matchAll(/(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g)) {
      if (reachesHelper(resolve(dirname(file), match[1] as string))) return true;
    }
    return false;
  };
  return files.some((file) => {
    const path = relative(root, file).split(sep).join('/');
    // test/conformance/ runs again on Redis (project conformance-on-redis in vitest.config.ts).
    if (['test/contract/', 'test/conformance/'].some((dir) => path.startsWith(dir))) return true;
    return reachesHelper(resolve(file));
  });
}

/** Files of this run: vitest records their paths (state.getPaths) before it runs the global setup. */
function selectedFiles(project: TestProject): string[] {
  try {
    return project.vitest.state.getPaths();
  } catch {
    return [];
  }
}

/** Resolves true when testcontainers finds a container runtime; never throws, gives up after a timeout. */
async function containerRuntimeAnswers(): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    const timeout = new Promise<never>((_, fail) => {
      timer = setTimeout(() => fail(new Error('timed out')), CONTAINER_PROBE_TIMEOUT_MS);
    });
    await Promise.race([getContainerRuntimeClient(), timeout]);
    return true;
  } catch (err) {
    note(`no container runtime (${err instanceof Error ? err.message : String(err)}): using local provisioning`);
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/** A TCP port free on this host right now (the kernel picks it). */
function freePort(): Promise<number> {
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

/** The runtime's host as an address that both this host and the containers can use. */
function hostAddress(host: string): string {
  return host === 'localhost' ? '127.0.0.1' : host;
}

/**
 * Starts the missing services in containers. Kafka and the cluster announce addresses that
 * clients on this host reach, so their host ports are fixed to ports found free here.
 */
async function startContainers(want: { kafka: boolean; redis: boolean; cluster: boolean }, stops: Stop[]) {
  const { GenericContainer, Wait, getContainerRuntimeClient } = await import('testcontainers');
  const runtime = await getContainerRuntimeClient();
  const host = hostAddress(runtime.info.containerRuntime.host);
  const found: Partial<Addresses> = {};

  if (want.kafka) {
    const port = await freePort();
    note(`starting ${KAFKA_IMAGE} in a container on ${host}:${port}`);
    const kafka = await new GenericContainer(KAFKA_IMAGE)
      .withExposedPorts({ container: 9092, host: port })
      .withEnvironment({
        KAFKA_NODE_ID: '1',
        KAFKA_PROCESS_ROLES: 'broker,controller',
        KAFKA_LISTENERS: 'PLAINTEXT://0.0.0.0:9092,BROKER://0.0.0.0:9094,CONTROLLER://0.0.0.0:9093',
        // Clients get host:port; the broker talks to itself on the in-container BROKER listener.
        KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://${host}:${port},BROKER://localhost:9094`,
        KAFKA_INTER_BROKER_LISTENER_NAME: 'BROKER',
        KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
        KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT',
        KAFKA_CONTROLLER_QUORUM_VOTERS: '1@localhost:9093',
        KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
        KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
        KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: '1',
        KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR: '1',
        KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR: '1',
        KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
        KAFKA_AUTO_CREATE_TOPICS_ENABLE: 'true',
        KAFKA_NUM_PARTITIONS: '4',
      })
      .withWaitStrategy(Wait.forLogMessage('Kafka Server started'))
      .withStartupTimeout(120_000)
      .start();
    stops.push(() => kafka.stop());
    found.kafkaBrokers = `${host}:${port}`;
  }

  if (want.redis) {
    note(`starting ${REDIS_IMAGE} in a container`);
    const redis = await new GenericContainer(REDIS_IMAGE)
      .withExposedPorts(6379)
      .withCommand(['redis-server', '--protected-mode', 'no', '--save', '', '--appendonly', 'no'])
      .withWaitStrategy(Wait.forLogMessage('Ready to accept connections'))
      .start();
    stops.push(() => redis.stop());
    found.redisUrl = `redis://${redis.getHost()}:${redis.getMappedPort(6379)}`;
  }

  if (want.cluster) {
    // Each node listens inside the container on the same port number as on the host, and
    // announces host:port, so the slot map that clients receive is reachable from here.
    // The cluster bus (port + 10000) is published too: nodes reach each other through it.
    const ports: number[] = [];
    while (ports.length < 3) {
      const port = await freePort();
      if (port + 10_000 <= 65_535 && !ports.includes(port)) ports.push(port);
    }
    const servers = ports
      .map(
        (port) =>
          `redis-server --port ${port} --cluster-enabled yes --cluster-config-file nodes-${port}.conf ` +
          `--cluster-announce-ip ${host} --protected-mode no --save '' --appendonly no --daemonize yes --logfile /tmp/redis-${port}.log`,
      )
      .join(' && ');
    const waits = ports.map((port) => `until redis-cli -p ${port} ping; do sleep 0.1; done`).join(' && ');
    const create = `redis-cli --cluster create ${ports.map((port) => `127.0.0.1:${port}`).join(' ')} --cluster-replicas 0 --cluster-yes`;
    note(`starting a Redis Cluster in a container on ${ports.map((port) => `${host}:${port}`).join(',')}`);
    const cluster = await new GenericContainer(REDIS_IMAGE)
      .withExposedPorts(
        ...ports.flatMap((port) => [
          { container: port, host: port },
          { container: port + 10_000, host: port + 10_000 },
        ]),
      )
      .withCommand(['sh', '-c', `${servers} && ${waits} && ${create} && echo CLUSTER-READY && exec sleep infinity`])
      .withWaitStrategy(Wait.forLogMessage('CLUSTER-READY'))
      .withStartupTimeout(60_000)
      .start();
    stops.push(() => cluster.stop());
    found.redisClusterNodes = ports.map((port) => `${host}:${port}`).join(',');
  }
  return found;
}

/** Provisions with scripts/infra.ts under a test lease; the last run out stops what test runs started. */
async function startLocal(want: { kafka: boolean; redis: boolean; cluster: boolean }, stops: Stop[]) {
  const infra = await import('../../scripts/infra.ts');
  await infra.acquireTestLease();
  stops.push(async () => {
    const stopped = await infra.releaseTestLease();
    if (stopped.length > 0) note(`stopped ${stopped.join(', ')}`);
  });
  const [kafka, redis, cluster] = await Promise.all([
    want.kafka ? infra.ensureKafka({ forTests: true }) : undefined,
    want.redis ? infra.ensureRedis({ forTests: true }) : undefined,
    want.cluster ? infra.startRedisCluster({ forTests: true }) : undefined,
  ]);
  const found: Partial<Addresses> = {};
  if (kafka) found.kafkaBrokers = kafka.brokers;
  if (redis) found.redisUrl = redis.url;
  if (cluster) found.redisClusterNodes = cluster.nodes.join(',');
  return found;
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const fromEnv: Addresses = {
    kafkaBrokers: process.env.KAFKA_BROKERS || null,
    redisUrl: process.env.REDIS_URL || null,
    redisClusterNodes: process.env.REDIS_CLUSTER_NODES || null,
  };
  const addresses: Addresses = { ...fromEnv };
  const stops: Stop[] = [];
  const teardown = async () => {
    // Reverse order of start; every stop is attempted even if one fails.
    const failures: unknown[] = [];
    for (const stop of stops.reverse()) {
      try {
        await stop();
      } catch (err) {
        failures.push(err);
      }
    }
    if (failures.length > 0) throw new AggregateError(failures, 'stopping test services failed');
  };

  const want = {
    kafka: addresses.kafkaBrokers === null,
    redis: addresses.redisUrl === null,
    cluster: addresses.redisClusterNodes === null,
  };
  const root = project.config.root;
  const files = selectedFiles(project);
  const needed = needsServices(root, files);
  if (!needed) note(`none of the ${files.length} selected file(s) needs Kafka or Redis: provisioning nothing`);
  if ((want.kafka || want.redis || want.cluster) && needed) {
    const mode = process.env.CTXFLOW_TEST_SERVICES ?? 'auto';
    const useContainers = mode === 'containers' || (mode === 'auto' && (await containerRuntimeAnswers()));
    try {
      Object.assign(addresses, useContainers ? await startContainers(want, stops) : await startLocal(want, stops));
    } catch (err) {
      await teardown().catch(() => {});
      throw err;
    }
  }

  for (const [key, envName] of [
    ['kafkaBrokers', 'KAFKA_BROKERS'],
    ['redisUrl', 'REDIS_URL'],
    ['redisClusterNodes', 'REDIS_CLUSTER_NODES'],
  ] as const) {
    const value = addresses[key];
    project.provide(key, value);
    if (value !== null) process.env[envName] = value;
  }
  note(
    `KAFKA_BROKERS=${addresses.kafkaBrokers ?? '-'} REDIS_URL=${addresses.redisUrl ?? '-'} ` +
      `REDIS_CLUSTER_NODES=${addresses.redisClusterNodes ?? '-'}`,
  );

  return async () => {
    for (const [key, envName] of [
      ['kafkaBrokers', 'KAFKA_BROKERS'],
      ['redisUrl', 'REDIS_URL'],
      ['redisClusterNodes', 'REDIS_CLUSTER_NODES'],
    ] as const) {
      if (fromEnv[key] === null) delete process.env[envName];
    }
    await teardown();
  };
}
