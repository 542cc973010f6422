/** Options shared by the Kafka adapters (kafkajs-bus.ts, platformatic-bus.ts). Times are in ms. */
import { CtxflowError } from '@ctxflow/contracts';

/** Where adapters report what they cannot throw (pino-shaped: fields first). */
export interface BusLog {
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/**
 * TLS to the brokers (a Strimzi TLS listener, MSK, Confluent Cloud): PEM texts,
 * already read. Without `ca` the system's CAs are trusted; `cert` and `key`
 * (both or neither) authenticate the client (mutual TLS). The broker's
 * certificate is always verified.
 */
export interface KafkaTls {
  ca?: string;
  cert?: string;
  key?: string;
}

/**
 * SASL authentication on each connection. PLAIN and SCRAM take a user and a
 * password; OAUTHBEARER takes a token provider, asked at every authentication
 * (so a rotated token file is read again).
 */
export type KafkaSasl =
  | { mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512'; username: string; password: string }
  | { mechanism: 'oauthbearer'; token: () => string | Promise<string> };

export interface KafkaBusOptions {
  /** `host:port` of at least one broker. */
  brokers: string[];
  clientId: string;
  /** TLS to the brokers; absent: plaintext. */
  tls?: KafkaTls;
  /** SASL authentication; absent: none. */
  sasl?: KafkaSasl;
  /** TCP connect timeout per attempt. Default 3000. */
  connectTimeoutMs?: number;
  /** Timeout of one broker request (a produce waits for acks=all within it). Default 30000. */
  requestTimeoutMs?: number;
  /** Retries of a failed client operation before `bus_unavailable`. Default 5. */
  retries?: number;
  /** Consumer group session timeout. Default 30000. */
  sessionTimeoutMs?: number;
  /** Consumer group heartbeat interval. Default 3000. */
  heartbeatIntervalMs?: number;
  /**
   * How long a rebalance waits for members to rejoin (a member that joined and died is
   * waited for that long). At least `sessionTimeoutMs`. Default 60000, or `sessionTimeoutMs` if longer.
   */
  rebalanceTimeoutMs?: number;
  /** Longest a fetch waits on the broker for new records (bounds `close()` latency). Default 500. */
  maxWaitMs?: number;
  /** Delay before redelivering after a handler rejection. Default 500. */
  retryBackoffMs?: number;
  /** Replication factor of topics made by `ensureTopics`; -1 takes the broker's default. Default -1. */
  replicationFactor?: number;
  log?: BusLog;
}

export type ResolvedKafkaBusOptions = Required<Omit<KafkaBusOptions, 'tls' | 'sasl'>> &
  Pick<KafkaBusOptions, 'tls' | 'sasl'>;

const silent: BusLog = {
  warn() {},
  error() {},
};

export function resolveKafkaBusOptions(options: KafkaBusOptions): ResolvedKafkaBusOptions {
  if (options.brokers.length === 0) throw new CtxflowError('internal_error', 'a Kafka bus needs at least one broker');
  const sessionTimeoutMs = options.sessionTimeoutMs ?? 30_000;
  const rebalanceTimeoutMs = options.rebalanceTimeoutMs ?? Math.max(60_000, sessionTimeoutMs);
  if (rebalanceTimeoutMs < sessionTimeoutMs) {
    throw new CtxflowError(
      'internal_error',
      `a rebalance timeout (${rebalanceTimeoutMs} ms) below the session timeout (${sessionTimeoutMs} ms)`,
    );
  }
  return {
    brokers: options.brokers,
    clientId: options.clientId,
    connectTimeoutMs: options.connectTimeoutMs ?? 3_000,
    requestTimeoutMs: options.requestTimeoutMs ?? 30_000,
    retries: options.retries ?? 5,
    sessionTimeoutMs,
    heartbeatIntervalMs: options.heartbeatIntervalMs ?? 3_000,
    rebalanceTimeoutMs,
    maxWaitMs: options.maxWaitMs ?? 500,
    retryBackoffMs: options.retryBackoffMs ?? 500,
    replicationFactor: options.replicationFactor ?? -1,
    log: options.log ?? silent,
    tls: options.tls,
    sasl: options.sasl,
  };
}

export function busUnavailable(what: string, cause: unknown): CtxflowError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new CtxflowError('bus_unavailable', `${what}: ${reason}`, { cause });
}

/** Kafka's protocol error code TOPIC_ALREADY_EXISTS. */
export const TOPIC_ALREADY_EXISTS = 36;

/**
 * True when every error inside `err` is Kafka's TOPIC_ALREADY_EXISTS (code 36):
 * a concurrent creator won the race, which is success for `ensureTopics`.
 * Both clients wrap the broker's per-topic errors: kafkajs throws a
 * KafkaJSAggregateError whose `errors` are KafkaJSCreateTopicError
 * `{ type: 'TOPIC_ALREADY_EXISTS', code: 36 }`; @platformatic/kafka throws
 * MultipleErrors > ResponseError > ProtocolError `{ apiId: 'TOPIC_ALREADY_EXISTS',
 * apiCode: 36 }`. Wrappers are followed through `errors` and `cause`.
 */
export function onlyTopicAlreadyExists(err: unknown, depth = 0): boolean {
  if (typeof err !== 'object' || err === null || depth > 8) return false;
  const e = err as { errors?: unknown; cause?: unknown; code?: unknown; apiCode?: unknown };
  if (Array.isArray(e.errors) && e.errors.length > 0) {
    return e.errors.every((inner) => onlyTopicAlreadyExists(inner, depth + 1));
  }
  if (e.code === TOPIC_ALREADY_EXISTS || e.apiCode === TOPIC_ALREADY_EXISTS) return true;
  return e.cause !== undefined && onlyTopicAlreadyExists(e.cause, depth + 1);
}

/** A sleep that ends early when `signal` aborts. */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** Offsets cross the port as decimal strings; this checks one before it reaches a client. */
export function parseOffset(offset: string): bigint {
  if (!/^\d+$/.test(offset)) throw new CtxflowError('internal_error', `not a Kafka offset: ${offset}`);
  return BigInt(offset);
}
