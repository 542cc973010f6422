import { DEFAULT_OFFSET_RESET, OFFSET_RESET_POLICIES } from '@ctxflow/bus';
import { readFeedSecrets, refineFeedSecrets } from '@ctxflow/feeds';
import {
  blank,
  connectionSecurity,
  isLoopback,
  parseApiKeys,
  parseConfigWithAuth,
  portVar,
  REFINE_ALWAYS,
  refineGroupTimeouts,
  serviceTokensOf,
  stackVars,
} from '@ctxflow/service-kit';
import { z } from 'zod';
import { receiptWebhookOf, receiptWebhookVars } from './receipt-config.ts';

/**
 * The session-runner's environment when it runs as its own process (the
 * stack). `REDIS_URL` or `REDIS_CLUSTER_NODES`: the Redis store; `KAFKA_BROKERS`:
 * step requests consumed from Kafka. `CTXFLOW_FEED_SECRET_<SOURCE>` (with
 * `KAFKA_BROKERS`): this port serves `/feeds/<source>` too, publishing to the
 * ticket-updates topic as the feed-ingestor does (the same secrets rules,
 * feed-ingestor's feed-secrets.ts), so the whole public contract is on one port.
 */
export const runnerConfigSchema = z
  .object({
    CTXFLOW_HOST: blank(z.string().min(1).default('127.0.0.1')),
    CTXFLOW_PORT: portVar(8080),
    CTXFLOW_STEP_CONTEXT_URL: blank(z.url({ protocol: /^https?$/ }).default('http://127.0.0.1:8082/step-context')),
    /** The token the runner sends to step-context (the file's first line), re-read when the file changes. */
    CTXFLOW_SERVICE_TOKEN_FILE: blank(z.string().min(1).optional()),
    /** Consumer group on TOPICS.stepRequests; default STEP_CONSUMER_GROUP (`ctxflow-session-runner`). */
    CTXFLOW_RUNNER_GROUP: blank(z.string().min(1).optional()),
    /** Sessions whose state the runner holds between steps (0: read every step). */
    CTXFLOW_HELD_SESSIONS: blank(z.coerce.number().int().min(0).default(1_000)),
    /**
     * Estimated heap bytes of held session states at most (session-cache.ts); absent:
     * caching-session-store.ts defaultHeldBytes (HELD_HEAP_SHARE of V8's heap limit), so it
     * follows the heap cap.
     */
    CTXFLOW_HELD_BYTES: blank(z.coerce.number().int().min(0).optional()),
    /** Request-id records a session keeps (adapters/request-retention.ts); older request ids run as new steps. */
    CTXFLOW_REQUEST_IDS_KEPT: blank(z.coerce.number().int().min(1).max(1_000_000).default(1_000)),
    /** Call records a session keeps with their call sites (adapters/request-retention.ts). */
    CTXFLOW_CALL_IDS_KEPT: blank(z.coerce.number().int().min(1).max(1_000_000).default(1_000)),
    /** App request keys of `POST /context` a session keeps (adapters/request-retention.ts). */
    CTXFLOW_REQUEST_KEYS_KEPT: blank(z.coerce.number().int().min(1).max(1_000_000).default(1_000)),
    /** A committed step-request offset that does not fit its partition's log (committed-offset-guard.ts). */
    CTXFLOW_OFFSET_RESET: blank(z.enum(OFFSET_RESET_POLICIES).default(DEFAULT_OFFSET_RESET)),
    /** Parsed by parseConfigWithAuth; here it decides how the feed secrets read. */
    CTXFLOW_API_KEYS: blank(z.string().optional()),
    /** Requests per tenant per minute on the secured routes, counted in Redis when there is one; absent: no limit. */
    CTXFLOW_RATE_LIMIT_PER_MINUTE: blank(z.coerce.number().int().min(1).max(1_000_000_000).optional()),
    /** Live sessions a tenant may have; absent: no cap. */
    CTXFLOW_TENANT_MAX_SESSIONS: blank(z.coerce.number().int().min(1).max(1_000_000_000).optional()),
    /** Publishes every committed context row as a CloudEvent on TOPICS.contextRows (an outbox relayed after the commit). */
    CTXFLOW_CONTEXT_ROW_EVENTS: blank(
      z
        .enum(['true', 'false', '1', '0'], { message: 'expected true or false' })
        .transform((v) => v === 'true' || v === '1')
        .default(false),
    ),
    /**
     * Shards the row outbox spreads sessions over: one relay (and one Kafka transactional id)
     * per shard at a time. Changed only with every runner stopped and the outbox relayed.
     */
    CTXFLOW_CONTEXT_ROW_SHARDS: blank(z.coerce.number().int().min(1).max(256).default(4)),
    CTXFLOW_FEED_SECRET_GENERIC: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_GITHUB: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_JIRA: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_ZENDESK: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_CLOUDEVENTS: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_PAGERDUTY: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_LINEAR: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_GITLAB: blank(z.string().min(1).optional()),
    ...receiptWebhookVars(),
    ...stackVars(),
  })
  // Kept: every other CTXFLOW_FEED_SECRET_<NAME> configures a source (feed-secrets.ts).
  .loose()
  .superRefine(refineFeedSecrets, REFINE_ALWAYS)
  .superRefine(refineGroupTimeouts, REFINE_ALWAYS)
  .transform((env, ctx) => ({
    host: env.CTXFLOW_HOST,
    port: env.CTXFLOW_PORT,
    stepContextUrl: env.CTXFLOW_STEP_CONTEXT_URL,
    serviceTokens: serviceTokensOf(env.CTXFLOW_SERVICE_TOKEN_FILE, ctx),
    redisPrefix: env.CTXFLOW_REDIS_PREFIX,
    groupId: env.CTXFLOW_RUNNER_GROUP,
    heldSessions: env.CTXFLOW_HELD_SESSIONS,
    heldBytes: env.CTXFLOW_HELD_BYTES,
    requestIdsKept: env.CTXFLOW_REQUEST_IDS_KEPT,
    callIdsKept: env.CTXFLOW_CALL_IDS_KEPT,
    requestKeysKept: env.CTXFLOW_REQUEST_KEYS_KEPT,
    offsetReset: env.CTXFLOW_OFFSET_RESET,
    ratePerMinute: env.CTXFLOW_RATE_LIMIT_PER_MINUTE,
    maxSessions: env.CTXFLOW_TENANT_MAX_SESSIONS,
    contextRowEvents: env.CTXFLOW_CONTEXT_ROW_EVENTS,
    receiptWebhook: receiptWebhookOf(env, ctx),
    contextRowShards: env.CTXFLOW_CONTEXT_ROW_SHARDS,
    logLevel: env.CTXFLOW_LOG_LEVEL,
    shutdownGraceMs: env.CTXFLOW_SHUTDOWN_GRACE_MS,
    sessionTtlMs: env.CTXFLOW_SESSION_TTL_MS,
    kafkaBrokers: env.KAFKA_BROKERS,
    kafkaClient: env.KAFKA_CLIENT,
    kafkaTopicPrefix: env.KAFKA_TOPIC_PREFIX,
    kafkaSessionTimeoutMs: env.KAFKA_SESSION_TIMEOUT_MS,
    kafkaRebalanceTimeoutMs: env.KAFKA_REBALANCE_TIMEOUT_MS,
    redisUrl: env.REDIS_URL,
    redisClusterNodes: env.REDIS_CLUSTER_NODES,
    secrets: readFeedSecrets(env).secrets,
    ...connectionSecurity(env, ctx),
  }));

export type RunnerConfig = ReturnType<typeof loadRunnerConfig>;

export function loadRunnerConfig(env: Record<string, string | undefined>) {
  return parseConfigWithAuth(runnerConfigSchema, env, { parseApiKeys, isLoopback });
}
