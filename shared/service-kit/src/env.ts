import { z } from 'zod';
import { connectionSecurityVars } from './connection-security.ts';
import { DEFAULT_SHUTDOWN_GRACE_MS } from './lifecycle.ts';

/** An unset or empty variable is absent. */
export const blank = <S extends z.ZodType>(schema: S) => z.preprocess((v) => (v === '' ? undefined : v), schema);

/** A TCP port with its default. */
export const portVar = (fallback: number) => blank(z.coerce.number().int().min(0).max(65_535).default(fallback));

/** `host:port,host:port` -> a list; absent means "not configured". */
export const hostListVar = () =>
  blank(
    z
      .string()
      .transform((s) =>
        s
          .split(',')
          .map((b) => b.trim())
          .filter(Boolean),
      )
      .pipe(z.array(z.string().regex(/^[^\s:]+:\d+$/, 'expected host:port')).min(1))
      .optional(),
  );

export const redisUrlVar = () => blank(z.url({ protocol: /^rediss?$/ }).optional());

export const logLevelVar = () =>
  blank(z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'));

export const kafkaClientVar = () => blank(z.enum(['kafkajs', 'platformatic']).default('platformatic'));

/** Consumer group session timeout in ms (the broker allows 6000-1800000 by default); absent: the bus's 30000. */
export const sessionTimeoutVar = () => blank(z.coerce.number().int().min(1_000).max(1_800_000).optional());

/**
 * `KAFKA_TOPIC_PREFIX`: prepended to every Kafka topic name (default none), so
 * deployments or tests can share a broker. Kafka topic names are at most 249
 * characters of `[a-zA-Z0-9._-]`.
 */
export const topicPrefixVar = () =>
  blank(
    z
      .string()
      .max(100)
      .regex(/^[a-zA-Z0-9._-]*$/, 'letters, digits, ".", "_" and "-" only')
      .default(''),
  );

/**
 * `CTXFLOW_SHUTDOWN_GRACE_MS`: ms from SIGTERM to exit at most (streams end at
 * once, HTTP connections are closed by half of it). Default 30000, which with
 * the manifests' 5 s preStop fits their 45 s termination grace.
 */
export const shutdownGraceVar = () =>
  blank(z.coerce.number().int().min(100).max(600_000).default(DEFAULT_SHUTDOWN_GRACE_MS));

/**
 * The variables every stack process reads for Kafka and Redis, spread into
 * its schema: `KAFKA_BROKERS` (else the in-memory bus), `KAFKA_CLIENT`,
 * `KAFKA_SESSION_TIMEOUT_MS`, `REDIS_URL` or `REDIS_CLUSTER_NODES` (else memory),
 * `KAFKA_TOPIC_PREFIX`, `CTXFLOW_REDIS_PREFIX`, `CTXFLOW_LOG_LEVEL`, `CTXFLOW_SHUTDOWN_GRACE_MS`,
 * and the secured-connection variables (`connectionSecurityVars`: `KAFKA_SSL*`,
 * `KAFKA_SASL_*`, `REDIS_TLS*`, `REDIS_USERNAME`, `REDIS_PASSWORD*`), which the
 * schema's transform turns into options with `connectionSecurity`.
 */
export const stackVars = () => ({
  CTXFLOW_SHUTDOWN_GRACE_MS: shutdownGraceVar(),
  CTXFLOW_REDIS_PREFIX: blank(z.string().min(1).default('ctxflow')),
  CTXFLOW_LOG_LEVEL: logLevelVar(),
  KAFKA_BROKERS: hostListVar(),
  KAFKA_CLIENT: kafkaClientVar(),
  KAFKA_TOPIC_PREFIX: topicPrefixVar(),
  KAFKA_SESSION_TIMEOUT_MS: sessionTimeoutVar(),
  REDIS_URL: redisUrlVar(),
  REDIS_CLUSTER_NODES: hostListVar(),
  ...connectionSecurityVars(),
});
