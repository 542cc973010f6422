/**
 * Addresses of the services provisioned by test/setup/services.ts, for tests that need
 * a real Kafka or Redis. Each function returns the address or THROWS: a test that needs a
 * service and cannot have it must fail, never skip.
 *
 * Importing this file also marks the test file as needing services, so a run that selects
 * only unit tests and no importer of this file provisions nothing.
 */
import { inject } from 'vitest';

function required(value: string | null | undefined, envValue: string | undefined, what: string): string {
  const address = value || envValue;
  if (!address) {
    throw new Error(
      `${what} is not available: test/setup/services.ts provisions it for files under test/contract/ ` +
        'or test/conformance/ or that import test/support/services.ts (or set it in the environment)',
    );
  }
  return address;
}

/** Kafka bootstrap list, e.g. `['127.0.0.1:19092']`. */
export function requireKafka(): string[] {
  return required(inject('kafkaBrokers'), process.env.KAFKA_BROKERS, 'KAFKA_BROKERS').split(',');
}

/** Redis URL, e.g. `redis://127.0.0.1:6379`. The server is shared: use unique key prefixes. */
export function requireRedis(): string {
  return required(inject('redisUrl'), process.env.REDIS_URL, 'REDIS_URL');
}

/** Redis Cluster nodes, e.g. `[{ host: '127.0.0.1', port: 17001 }, ...]` (the shape ioredis `Cluster` takes). */
export function requireRedisCluster(): { host: string; port: number }[] {
  const nodes = required(inject('redisClusterNodes'), process.env.REDIS_CLUSTER_NODES, 'REDIS_CLUSTER_NODES');
  return nodes.split(',').map((node) => {
    const colon = node.lastIndexOf(':');
    const port = Number.parseInt(node.slice(colon + 1), 10);
    if (colon <= 0 || !Number.isInteger(port)) throw new Error(`REDIS_CLUSTER_NODES: bad node ${JSON.stringify(node)}`);
    return { host: node.slice(0, colon), port };
  });
}
