import { readFeedSecrets, refineFeedSecrets } from '@ctxflow/feeds';
import {
  blank,
  type IdentityConfig,
  isLoopback,
  logLevelVar,
  parseApiKeys,
  parseConfigWithAuth,
  portVar,
  REFINE_ALWAYS,
  sessionTtlVar,
  shutdownGraceVar,
} from '@ctxflow/service-kit';
import { receiptWebhookOf, receiptWebhookVars } from '@ctxflow/session-runner';
import { z } from 'zod';

/**
 * The embedded default's environment (README.md "Configuration"). Every
 * problem is reported at once, each naming its variable.
 */
export const embeddedConfigSchema = z
  .object({
    CTXFLOW_HOST: blank(z.string().min(1).default('127.0.0.1')),
    CTXFLOW_PORT: portVar(8080),
    /** Parsed by parseConfigWithAuth; here it decides how the feed secrets read (feed-secrets.ts). */
    CTXFLOW_API_KEYS: blank(z.string().optional()),
    /** Requests per tenant per minute on the secured routes (this process's count); absent: no limit. */
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
    CTXFLOW_FEED_SECRET_GENERIC: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_GITHUB: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_JIRA: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_ZENDESK: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_CLOUDEVENTS: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_PAGERDUTY: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_LINEAR: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_GITLAB: blank(z.string().min(1).optional()),
    CTXFLOW_LOG_LEVEL: logLevelVar(),
    CTXFLOW_SHUTDOWN_GRACE_MS: shutdownGraceVar(),
    CTXFLOW_SESSION_TTL_MS: sessionTtlVar(),
    ...receiptWebhookVars(),
  })
  // Kept: every other CTXFLOW_FEED_SECRET_<NAME> configures a source (feed-secrets.ts).
  .loose()
  .superRefine(refineFeedSecrets, REFINE_ALWAYS)
  .transform((env, ctx) => {
    const { secrets } = readFeedSecrets(env);
    return {
      host: env.CTXFLOW_HOST,
      port: env.CTXFLOW_PORT,
      secrets,
      logLevel: env.CTXFLOW_LOG_LEVEL,
      shutdownGraceMs: env.CTXFLOW_SHUTDOWN_GRACE_MS,
      sessionTtlMs: env.CTXFLOW_SESSION_TTL_MS,
      ratePerMinute: env.CTXFLOW_RATE_LIMIT_PER_MINUTE,
      maxSessions: env.CTXFLOW_TENANT_MAX_SESSIONS,
      contextRowEvents: env.CTXFLOW_CONTEXT_ROW_EVENTS,
      receiptWebhook: receiptWebhookOf(env, ctx),
    };
  });

export type EmbeddedConfig = Readonly<
  z.output<typeof embeddedConfigSchema> & { apiKeys: Map<string, string>; identity: IdentityConfig }
>;

export function loadEmbeddedConfig(env: Record<string, string | undefined>): EmbeddedConfig {
  return parseConfigWithAuth(embeddedConfigSchema, env, { parseApiKeys, isLoopback });
}
