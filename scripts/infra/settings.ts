import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const INFRA_DIR = join(ROOT, '.infra');

export const HOST = '127.0.0.1';
export const KAFKA_PORT = 19092;
export const KAFKA_CONTROLLER_PORT = 19093;
export const REDIS_PORT = 6379;
export const REDIS_CLUSTER_PORTS: readonly number[] = [17001, 17002, 17003];

export const KAFKA_BROKERS = `${HOST}:${KAFKA_PORT}`;
export const REDIS_URL = `redis://${HOST}:${REDIS_PORT}`;

export const KAFKA_DIR = join(INFRA_DIR, 'kafka');
export const KAFKA_LIBS = join(KAFKA_DIR, 'libs');
export const KAFKA_POM = join(ROOT, 'deploy/local/kafka/pom.xml');
export const KAFKA_LOG4J = join(ROOT, 'deploy/local/kafka/log4j2.properties');
export const KAFKA_LOG = join(KAFKA_DIR, 'server.log');
export const REDIS_DIR = join(INFRA_DIR, 'redis');
export const CLUSTER_DIR = join(INFRA_DIR, 'redis-cluster');
/** Pid files, in this checkout's .infra or in another checkout's (`dir`). */
export const kafkaPidFile = (dir = INFRA_DIR) => join(dir, 'kafka', 'kafka.pid');
export const redisPidFile = (dir = INFRA_DIR) => join(dir, 'redis', 'redis.pid');
export const clusterPidFile = (port: number, dir = INFRA_DIR) => join(dir, 'redis-cluster', String(port), 'redis.pid');

/**
 * Machine-wide coordination. The ports are machine-wide, so the locks, the leases of test
 * runs and the "started by a test run" markers are too: a clone in /tmp and the main
 * checkout share one broker without pulling it from under each other.
 */
export const STATE_DIR = process.env.CTXFLOW_INFRA_STATE_DIR || join(tmpdir(), 'ctxflow-infra');
export const LOCKS_DIR = join(STATE_DIR, 'locks');
export const LEASES_DIR = join(STATE_DIR, 'leases');
export const MARKERS_DIR = join(STATE_DIR, 'started-by-tests');

export const SERVICE_NAMES = ['kafka', 'redis', 'redisCluster'] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

/** Records that a test run started `name` from this checkout; the last test run out stops it. */
export async function markStartedByTests(name: ServiceName): Promise<void> {
  await mkdir(MARKERS_DIR, { recursive: true });
  await writeFile(join(MARKERS_DIR, name), INFRA_DIR);
}

/** The .infra dir of the checkout whose test run started `name`, if one did. */
export async function markerOwner(name: ServiceName): Promise<string | undefined> {
  try {
    return (await readFile(join(MARKERS_DIR, name), 'utf8')) || undefined;
  } catch {
    return undefined;
  }
}

/** Drops the marker: always (`owner` undefined), or only when `owner` holds it. */
export async function clearMarker(name: ServiceName, owner?: string): Promise<void> {
  if (owner === undefined || (await markerOwner(name)) === owner) await rm(join(MARKERS_DIR, name), { force: true });
}

export const KAFKA_READY_TIMEOUT_MS = 120_000;
export const REDIS_READY_TIMEOUT_MS = 30_000;
export const CLUSTER_READY_TIMEOUT_MS = 60_000;
export const STOP_TIMEOUT_MS = 30_000;
/** A cold start downloads the Kafka jars while holding the lock: waiters must outlast that. */
export const LOCK_TIMEOUT_MS = 600_000;

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

export function log(message: string): void {
  process.stderr.write(`[infra] ${message}\n`);
}

export const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));
