import { z } from 'zod';
import { blank } from './blank.ts';
import { connectionSecurityVars } from './connection-security.ts';
import { DEFAULT_SHUTDOWN_GRACE_MS } from './lifecycle.ts';

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

/** A schema refinement's options: run it whatever else failed, so every problem is reported at once. */
export const REFINE_ALWAYS = { when: () => true } as const;

/** The bus's consumer group session timeout when `KAFKA_SESSION_TIMEOUT_MS` is absent (shared/bus kafka-options.ts). */
export const DEFAULT_KAFKA_SESSION_TIMEOUT_MS = 30_000;

/** The range of the consumer group timeouts, in ms. */
const GROUP_TIMEOUT_MS = { min: 1_000, max: 1_800_000 } as const;
const groupTimeoutVar = () =>
  blank(z.coerce.number().int().min(GROUP_TIMEOUT_MS.min).max(GROUP_TIMEOUT_MS.max).optional());
const isGroupTimeout = (ms: unknown): ms is number =>
  Number.isInteger(ms) && (ms as number) >= GROUP_TIMEOUT_MS.min && (ms as number) <= GROUP_TIMEOUT_MS.max;

/** Consumer group session timeout in ms (the broker allows 6000-1800000 by default); absent: the bus's 30000. */
export const sessionTimeoutVar = groupTimeoutVar;

/**
 * `KAFKA_REBALANCE_TIMEOUT_MS`: how long the group coordinator holds a
 * rebalance for its members to rejoin, in ms; a member that joined and then
 * died can keep the whole group's partitions unconsumed that long. At least the
 * session timeout (refineGroupTimeouts); absent: the bus's default, 60000 or the
 * session timeout if longer.
 */
export const rebalanceTimeoutVar = groupTimeoutVar;

/**
 * A schema refinement (run it whatever else failed): `KAFKA_REBALANCE_TIMEOUT_MS`
 * below the session timeout (`KAFKA_SESSION_TIMEOUT_MS`, else the bus's 30000)
 * is a problem naming it; both clients need a rebalance at least a session long.
 */
export function refineGroupTimeouts(env: Readonly<Record<string, unknown>>, ctx: z.RefinementCtx): void {
  const rebalance = env.KAFKA_REBALANCE_TIMEOUT_MS;
  const session = env.KAFKA_SESSION_TIMEOUT_MS ?? DEFAULT_KAFKA_SESSION_TIMEOUT_MS;
  // A value out of its own range is reported by its own variable, once.
  if (!isGroupTimeout(rebalance) || !isGroupTimeout(session) || rebalance >= session) return;
  ctx.addIssue({
    code: 'custom',
    path: ['KAFKA_REBALANCE_TIMEOUT_MS'],
    message: `${rebalance} is below the session timeout (${session} ms${
      env.KAFKA_SESSION_TIMEOUT_MS === undefined ? ', the default' : ', KAFKA_SESSION_TIMEOUT_MS'
    }): a rebalance must last at least a session`,
  });
}

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

/** Default `CTXFLOW_SESSION_TTL_MS`: 30 days of inactivity. */
export const DEFAULT_SESSION_TTL_MS = 30 * 24 * 60 * 60 * 1000;

/**
 * `CTXFLOW_SESSION_TTL_MS`: ms a session is kept after its last write, in
 * every store (its keys expire together, each write refreshes them); `0`
 * keeps sessions until they are deleted. Default 30 days.
 */
export const sessionTtlVar = () =>
  blank(z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(DEFAULT_SESSION_TTL_MS));

/**
 * The variables every stack process reads for Kafka and Redis, spread into
 * its schema: `KAFKA_BROKERS` (else the in-memory bus), `KAFKA_CLIENT`,
 * `KAFKA_SESSION_TIMEOUT_MS`, `KAFKA_REBALANCE_TIMEOUT_MS` (check them together
 * with refineGroupTimeouts), `REDIS_URL` or `REDIS_CLUSTER_NODES` (else memory),
 * `KAFKA_TOPIC_PREFIX`, `CTXFLOW_REDIS_PREFIX`, `CTXFLOW_LOG_LEVEL`, `CTXFLOW_SHUTDOWN_GRACE_MS`,
 * `CTXFLOW_SESSION_TTL_MS`,
 * and the secured-connection variables (`connectionSecurityVars`: `KAFKA_SSL*`,
 * `KAFKA_SASL_*`, `REDIS_TLS*`, `REDIS_USERNAME`, `REDIS_PASSWORD*`), which the
 * schema's transform turns into options with `connectionSecurity`.
 */
export const stackVars = () => ({
  CTXFLOW_SHUTDOWN_GRACE_MS: shutdownGraceVar(),
  CTXFLOW_SESSION_TTL_MS: sessionTtlVar(),
  CTXFLOW_REDIS_PREFIX: blank(z.string().min(1).default('ctxflow')),
  CTXFLOW_LOG_LEVEL: logLevelVar(),
  KAFKA_BROKERS: hostListVar(),
  KAFKA_CLIENT: kafkaClientVar(),
  KAFKA_TOPIC_PREFIX: topicPrefixVar(),
  KAFKA_SESSION_TIMEOUT_MS: sessionTimeoutVar(),
  KAFKA_REBALANCE_TIMEOUT_MS: rebalanceTimeoutVar(),
  REDIS_URL: redisUrlVar(),
  REDIS_CLUSTER_NODES: hostListVar(),
  ...connectionSecurityVars(),
});
