import { createConnection } from 'node:net';
import { HOST, KAFKA_PORT, REDIS_PORT } from './settings.ts';

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

export async function clusterStateOk(port: number): Promise<boolean> {
  try {
    return (await redisCommand(port, ['CLUSTER', 'INFO'])).includes('cluster_state:ok');
  } catch {
    return false;
  }
}
