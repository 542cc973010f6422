import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { type RedisSecurity, tlsOptions } from './connection-security.ts';

/**
 * The Redis client a stack process uses: a Redis Cluster when nodes are given
 * (`host:port` each), else one server by URL, else none (in-memory adapters).
 * `redisSecurity` adds TLS (a `rediss://` URL or `REDIS_TLS=true`, with its CA
 * and client certificate) and the ACL user and password, on every node of a Cluster.
 */
export function connectRedis(
  config: {
    redisUrl?: string | undefined;
    redisClusterNodes?: string[] | undefined;
    redisSecurity?: RedisSecurity | undefined;
  },
  options: { maxRetriesPerRequest?: number } = {},
): Redis | Cluster | undefined {
  const security: RedisOptions = {};
  const given = config.redisSecurity;
  if (given?.tls !== undefined) security.tls = tlsOptions(given.tls);
  if (given?.username !== undefined) security.username = given.username;
  if (given?.password !== undefined) security.password = given.password.reveal();
  if (config.redisClusterNodes?.length) {
    return new Cluster(
      config.redisClusterNodes.map((node) => {
        const colon = node.lastIndexOf(':');
        return { host: node.slice(0, colon), port: Number(node.slice(colon + 1)) };
      }),
      {
        redisOptions: security,
        // On TLS, nodes are reached by the names given (not resolved to addresses first), so
        // the certificate is checked against the name it was issued for (as for ElastiCache).
        ...(security.tls !== undefined ? { dnsLookup: (address, callback) => callback(null, address) } : {}),
      },
    );
  }
  if (config.redisUrl) {
    // The URL's own user and password are taken into `security` by the configuration; options win over it.
    return new Redis(config.redisUrl, { maxRetriesPerRequest: options.maxRetriesPerRequest ?? 3, ...security });
  }
  return undefined;
}

/**
 * Resolves once Redis answers PING, or rejects within `timeoutMs` with the
 * first connection error the client reported (a refused password, an
 * untrusted certificate), so a start fails with its cause rather than a retry count.
 */
export function verifyRedis(client: Redis | Cluster, timeoutMs = 10_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const errors: Error[] = [];
    const onError = (err: Error) => {
      errors.push(err);
    };
    const done = (err?: unknown) => {
      clearTimeout(timer);
      client.off('error', onError);
      client.off('node error', onError);
      if (err === undefined) resolve();
      else reject(errors.length > 0 ? new AggregateError([...errors, err], errors[0]?.message) : err);
    };
    const timer = setTimeout(() => done(new Error(`Redis did not answer PING within ${timeoutMs} ms`)), timeoutMs);
    client.on('error', onError);
    client.on('node error', onError);
    client.ping().then(
      () => done(),
      (err: unknown) => done(err),
    );
  });
}

/**
 * Bus options of a consumer group: the session timeout with the heartbeat at a
 * third of it (at most 3 s), and the rebalance timeout; an absent one is the bus's default.
 */
export function consumerGroupOptions(timeouts: { sessionTimeoutMs?: number; rebalanceTimeoutMs?: number }) {
  const { sessionTimeoutMs: session, rebalanceTimeoutMs: rebalance } = timeouts;
  return {
    ...(session === undefined
      ? {}
      : { sessionTimeoutMs: session, heartbeatIntervalMs: Math.min(3_000, Math.floor(session / 3)) }),
    ...(rebalance === undefined ? {} : { rebalanceTimeoutMs: rebalance }),
  };
}
