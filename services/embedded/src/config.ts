import { FEED_SOURCES, type FeedSource } from '@ctxflow/contracts';
import { blank, isLoopback, logLevelVar, parseApiKeys, parseConfigWithAuth, portVar } from '@ctxflow/service-kit';
import { z } from 'zod';

/**
 * The embedded default's environment (README.md "Configuration"). Every
 * problem is reported at once, each naming its variable.
 */
export const embeddedConfigSchema = z
  .object({
    CTXFLOW_HOST: blank(z.string().min(1).default('127.0.0.1')),
    CTXFLOW_PORT: portVar(8080),
    CTXFLOW_FEED_SECRET_GENERIC: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_GITHUB: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_JIRA: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_ZENDESK: blank(z.string().min(1).optional()),
    CTXFLOW_LOG_LEVEL: logLevelVar(),
  })
  .transform((env) => {
    const secrets: Partial<Record<FeedSource, string>> = {};
    for (const source of FEED_SOURCES) {
      const value = env[`CTXFLOW_FEED_SECRET_${source.toUpperCase()}` as keyof typeof env];
      if (typeof value === 'string') secrets[source] = value;
    }
    return { host: env.CTXFLOW_HOST, port: env.CTXFLOW_PORT, secrets, logLevel: env.CTXFLOW_LOG_LEVEL };
  });

export type EmbeddedConfig = Readonly<z.output<typeof embeddedConfigSchema> & { apiKeys: Map<string, string> }>;

export function loadEmbeddedConfig(env: Record<string, string | undefined>): EmbeddedConfig {
  return parseConfigWithAuth(embeddedConfigSchema, env, { parseApiKeys, isLoopback });
}
