import {
  DEFAULT_FEED_MAX_BYTES,
  DEFAULT_LEASE_MS,
  DEFAULT_RETAIN_MS,
  readFeedSecrets,
  refineFeedSecrets,
} from '@ctxflow/feeds';
import {
  blank,
  connectionSecurity,
  connectionSecurityVars,
  hostListVar,
  kafkaClientVar,
  logLevelVar,
  parseApiKeys,
  parseConfig,
  portVar,
  REFINE_ALWAYS,
  redisUrlVar,
  shutdownGraceVar,
  topicPrefixVar,
} from '@ctxflow/service-kit';
import { z } from 'zod';

const secret = blank(z.string().min(1).optional());

/**
 * The feed-ingestor's environment. Units live in the names (`_BYTES`, `_MS`).
 * `KAFKA_BROKERS` set: the real bus; `REDIS_URL` or `REDIS_CLUSTER_NODES` set:
 * the delivery ledger on that Redis (every ledger command touches one key, so a
 * Cluster serves as well); neither: the in-memory ledger.
 * `CTXFLOW_API_KEYS` set (the same value as the API's): every feed secret is a
 * list of `tenant:secret` pairs naming tenants of those keys (feed-secrets.ts);
 * the feed-ingestor itself takes no bearer keys. Any other
 * `CTXFLOW_FEED_SECRET_<NAME>` configures a source `<name>` (generic format).
 */
export const feedConfigSchema = z
  .object({
    CTXFLOW_HOST: blank(z.string().min(1).default('127.0.0.1')),
    CTXFLOW_FEED_PORT: portVar(8081),
    CTXFLOW_API_KEYS: blank(z.string().optional()),
    CTXFLOW_FEED_SECRET_GENERIC: secret,
    CTXFLOW_FEED_SECRET_GITHUB: secret,
    CTXFLOW_FEED_SECRET_JIRA: secret,
    CTXFLOW_FEED_SECRET_ZENDESK: secret,
    CTXFLOW_FEED_SECRET_CLOUDEVENTS: secret,
    CTXFLOW_FEED_SECRET_PAGERDUTY: secret,
    CTXFLOW_FEED_SECRET_LINEAR: secret,
    CTXFLOW_FEED_SECRET_GITLAB: secret,
    CTXFLOW_FEED_MAX_BYTES: blank(
      z.coerce
        .number()
        .int()
        .min(1024)
        .max(16 * 1024 * 1024)
        .default(DEFAULT_FEED_MAX_BYTES),
    ),
    CTXFLOW_FEED_DEDUPE_TTL_MS: blank(z.coerce.number().int().min(1000).default(DEFAULT_RETAIN_MS)),
    /**
     * How long a delivery being published holds its id (503 + Retry-After to a copy meanwhile);
     * a delivery whose instance died mid-publish is taken again once it ends.
     */
    CTXFLOW_FEED_LEASE_MS: blank(z.coerce.number().int().min(1000).max(600_000).default(DEFAULT_LEASE_MS)),
    CTXFLOW_REDIS_PREFIX: blank(z.string().min(1).default('ctxflow')),
    KAFKA_BROKERS: hostListVar(),
    KAFKA_CLIENT: kafkaClientVar(),
    KAFKA_TOPIC_PREFIX: topicPrefixVar(),
    /** Partitions of the ticket-updates topic when this service creates it (keyed by `${source}:${ticket}`). */
    CTXFLOW_TICKET_UPDATE_PARTITIONS: blank(z.coerce.number().int().min(1).max(1024).default(12)),
    CTXFLOW_LOG_LEVEL: logLevelVar(),
    CTXFLOW_SHUTDOWN_GRACE_MS: shutdownGraceVar(),
    REDIS_URL: redisUrlVar(),
    REDIS_CLUSTER_NODES: hostListVar(),
    ...connectionSecurityVars(),
  })
  // Kept: every other CTXFLOW_FEED_SECRET_<NAME> configures a source (feed-secrets.ts); nothing else is read.
  .loose()
  .superRefine((env, ctx) => {
    try {
      parseApiKeys(env.CTXFLOW_API_KEYS);
    } catch (err) {
      ctx.addIssue({
        code: 'custom',
        path: ['CTXFLOW_API_KEYS'],
        message: (err as Error).message.replace(/^CTXFLOW_API_KEYS: /, ''),
      });
    }
    refineFeedSecrets(env, ctx);
  }, REFINE_ALWAYS)
  .transform((env, ctx) => {
    const { secrets } = readFeedSecrets(env);
    return {
      host: env.CTXFLOW_HOST,
      port: env.CTXFLOW_FEED_PORT,
      secrets: Object.freeze(secrets),
      maxBodyBytes: env.CTXFLOW_FEED_MAX_BYTES,
      dedupeTtlMs: env.CTXFLOW_FEED_DEDUPE_TTL_MS,
      leaseMs: env.CTXFLOW_FEED_LEASE_MS,
      redisPrefix: env.CTXFLOW_REDIS_PREFIX,
      kafkaBrokers: env.KAFKA_BROKERS,
      kafkaClient: env.KAFKA_CLIENT,
      kafkaTopicPrefix: env.KAFKA_TOPIC_PREFIX,
      ticketUpdatePartitions: env.CTXFLOW_TICKET_UPDATE_PARTITIONS,
      logLevel: env.CTXFLOW_LOG_LEVEL,
      shutdownGraceMs: env.CTXFLOW_SHUTDOWN_GRACE_MS,
      redisUrl: env.REDIS_URL,
      redisClusterNodes: env.REDIS_CLUSTER_NODES,
      ...connectionSecurity(env, ctx),
    };
  });

export type FeedConfig = Readonly<z.output<typeof feedConfigSchema>>;

/** Parses the environment once; every problem is reported at once (ConfigError). */
export function loadFeedConfig(env: Record<string, string | undefined>): FeedConfig {
  return parseConfig(feedConfigSchema, env);
}
