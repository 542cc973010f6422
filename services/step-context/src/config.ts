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
import { DEFAULT_OFFSET_RESET, OFFSET_RESET_POLICIES } from './domain/offset-check.ts';

/**
 * step-context's environment when it runs as its own process (the stack).
 * `KAFKA_BROKERS`: ticket updates consumed from Kafka (else an in-memory bus,
 * which nothing else publishes to); `REDIS_URL` or `REDIS_CLUSTER_NODES`: the
 * Redis stores (else in memory), where the session-runner's records of its
 * sessions tell who owns one (CTXFLOW_REDIS_PREFIX: the same as the runner's).
 */
export const stepContextConfigSchema = z
  .object({
    CTXFLOW_HOST: blank(z.string().min(1).default('127.0.0.1')),
    CTXFLOW_STEP_CONTEXT_PORT: portVar(8082),
    /** Consumer group on TOPICS.ticketUpdates; default STEP_CONTEXT_GROUP (`ctxflow-step-context`). */
    CTXFLOW_STEP_CONTEXT_GROUP: blank(z.string().min(1).optional()),
    /**
     * What to do with a partition whose stored offset does not fit its log at an
     * assignment (the topic created again, Redis restored from another copy):
     * domain/offset-check.ts. Default `earliest`.
     */
    CTXFLOW_OFFSET_RESET: blank(z.enum(OFFSET_RESET_POLICIES).default(DEFAULT_OFFSET_RESET)),
    /** The tokens `POST /step-context` accepts (any line of the file), re-read when the file changes. */
    CTXFLOW_SERVICE_TOKEN_FILE: blank(z.string().min(1).optional()),
    ...stackVars(),
  })
  .superRefine(refineGroupTimeouts, REFINE_ALWAYS)
  .transform((env, ctx) => ({
    host: env.CTXFLOW_HOST,
    port: env.CTXFLOW_STEP_CONTEXT_PORT,
    redisPrefix: env.CTXFLOW_REDIS_PREFIX,
    groupId: env.CTXFLOW_STEP_CONTEXT_GROUP,
    offsetReset: env.CTXFLOW_OFFSET_RESET,
    serviceTokens: serviceTokensOf(env.CTXFLOW_SERVICE_TOKEN_FILE, ctx),
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
    ...connectionSecurity(env, ctx),
  }));

export type StepContextConfig = ReturnType<typeof loadStepContextConfig>;

export function loadStepContextConfig(env: Record<string, string | undefined>) {
  return parseConfigWithAuth(stepContextConfigSchema, env, { parseApiKeys, isLoopback });
}
