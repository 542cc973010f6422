import { readdirSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { clusterStateOk, redisAnswers, tcpConnects } from './probes.ts';
import { livePid, run, stopPid, waitFor, withLock } from './processes.ts';
import {
  CLUSTER_DIR,
  CLUSTER_READY_TIMEOUT_MS,
  clearMarker,
  clusterPidFile,
  type EnsureOptions,
  HOST,
  INFRA_DIR,
  log,
  markStartedByTests,
  REDIS_CLUSTER_PORTS,
  REDIS_DIR,
  REDIS_PORT,
  REDIS_READY_TIMEOUT_MS,
  REDIS_URL,
  type RedisClusterResult,
  type RedisResult,
  redisPidFile,
} from './settings.ts';

export interface RedisServerOptions {
  port: number;
  dir: string;
  pidFile: string;
  extra?: readonly string[];
}

/** Starts a daemonized redis-server with no persistence, bound to loopback. */
export async function startRedisServer({ port, dir, pidFile, extra = [] }: RedisServerOptions): Promise<void> {
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

export const clusterNodeDir = (port: number) => join(CLUSTER_DIR, String(port));

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

export async function stopClusterNodes(ports: readonly number[], infraDir = INFRA_DIR): Promise<boolean> {
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
export function clusterPortsOnDisk(infraDir: string): number[] {
  try {
    return readdirSync(join(infraDir, 'redis-cluster'))
      .map((name) => Number.parseInt(name, 10))
      .filter((port) => Number.isInteger(port));
  } catch {
    return [];
  }
}
