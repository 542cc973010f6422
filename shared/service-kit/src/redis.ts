import { Cluster, Redis } from 'ioredis';

/**
 * The Redis client a stack process uses: a Redis Cluster when nodes are given
 * (`host:port` each), else one server by URL, else none (in-memory adapters).
 */
export function connectRedis(config: {
  redisUrl?: string | undefined;
  redisClusterNodes?: string[] | undefined;
}): Redis | Cluster | undefined {
  if (config.redisClusterNodes?.length) {
    return new Cluster(
      config.redisClusterNodes.map((node) => {
        const colon = node.lastIndexOf(':');
        return { host: node.slice(0, colon), port: Number(node.slice(colon + 1)) };
      }),
    );
  }
  if (config.redisUrl) return new Redis(config.redisUrl, { maxRetriesPerRequest: 3 });
  return undefined;
}

/** Bus options for a consumer group session timeout, with the heartbeat at a third of it (at most 3 s). */
export function sessionTimeoutOptions(ms: number | undefined) {
  return ms === undefined ? {} : { sessionTimeoutMs: ms, heartbeatIntervalMs: Math.min(3_000, Math.floor(ms / 3)) };
}
