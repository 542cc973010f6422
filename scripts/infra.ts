import { readdirSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureKafka, stopKafka } from './infra/kafka.ts';
import { isAlive, withLock } from './infra/processes.ts';
import { ensureRedis, startRedisCluster, stopRedis, stopRedisCluster } from './infra/redis.ts';
import { LEASES_DIR, log, markerOwner, SERVICE_NAMES, type ServiceName } from './infra/settings.ts';

export {
  ensureKafka,
  formatKafkaNodeStorage,
  type KafkaNodeConfig,
  kafkaNodeCommand,
  kafkaNodeProperties,
  newKafkaClusterId,
  stopKafka,
} from './infra/kafka.ts';
export { kafkaAnswers, redisAnswers, redisCommand, tcpConnects } from './infra/probes.ts';
export {
  ensureRedis,
  type RedisClusterOptions,
  startRedisCluster,
  stopRedis,
  stopRedisCluster,
} from './infra/redis.ts';
export {
  type EnsureOptions,
  type EnsureResult,
  HOST,
  INFRA_DIR,
  KAFKA_BROKERS,
  KAFKA_CONTROLLER_PORT,
  KAFKA_PORT,
  type KafkaResult,
  REDIS_CLUSTER_PORTS,
  REDIS_PORT,
  REDIS_URL,
  type RedisClusterResult,
  type RedisResult,
  ROOT,
  SERVICE_NAMES,
  type ServiceName,
  STATE_DIR,
} from './infra/settings.ts';

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
