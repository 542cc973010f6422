import { blank, isLoopback, parseApiKeys, parseConfigWithAuth, portVar, stackVars } from '@ctxflow/service-kit';
import { z } from 'zod';

/**
 * The session-runner's environment when it runs as its own process (the
 * stack). `REDIS_URL` or `REDIS_CLUSTER_NODES`: the Redis store; `KAFKA_BROKERS`:
 * step requests consumed from Kafka.
 */
export const runnerConfigSchema = z
  .object({
    CTXFLOW_HOST: blank(z.string().min(1).default('127.0.0.1')),
    CTXFLOW_PORT: portVar(8080),
    CTXFLOW_STEP_CONTEXT_URL: blank(z.url({ protocol: /^https?$/ }).default('http://127.0.0.1:8082/step-context')),
    /** Consumer group on TOPICS.stepRequests; default STEP_CONSUMER_GROUP (`ctxflow-session-runner`). */
    CTXFLOW_RUNNER_GROUP: blank(z.string().min(1).optional()),
    /** Sessions whose state the runner holds between steps (0: read every step). */
    CTXFLOW_HELD_SESSIONS: blank(z.coerce.number().int().min(0).default(1_000)),
    /** Estimated heap bytes of held session states at most (session-cache.ts). */
    CTXFLOW_HELD_BYTES: blank(
      z.coerce
        .number()
        .int()
        .min(0)
        .default(64 * 1024 * 1024),
    ),
    ...stackVars(),
  })
  .transform((env) => ({
    host: env.CTXFLOW_HOST,
    port: env.CTXFLOW_PORT,
    stepContextUrl: env.CTXFLOW_STEP_CONTEXT_URL,
    redisPrefix: env.CTXFLOW_REDIS_PREFIX,
    groupId: env.CTXFLOW_RUNNER_GROUP,
    heldSessions: env.CTXFLOW_HELD_SESSIONS,
    heldBytes: env.CTXFLOW_HELD_BYTES,
    logLevel: env.CTXFLOW_LOG_LEVEL,
    kafkaBrokers: env.KAFKA_BROKERS,
    kafkaClient: env.KAFKA_CLIENT,
    kafkaSessionTimeoutMs: env.KAFKA_SESSION_TIMEOUT_MS,
    redisUrl: env.REDIS_URL,
    redisClusterNodes: env.REDIS_CLUSTER_NODES,
  }));

export type RunnerConfig = ReturnType<typeof loadRunnerConfig>;

export function loadRunnerConfig(env: Record<string, string | undefined>) {
  return parseConfigWithAuth(runnerConfigSchema, env, { parseApiKeys, isLoopback });
}
