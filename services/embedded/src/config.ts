import { FEED_SOURCES, type FeedSource } from '@ctxflow/contracts';
import { ConfigError, isLoopback, parseApiKeys, parseConfig } from '@ctxflow/service-kit';
import { z } from 'zod';

/** An unset or empty variable is absent. */
const blank = <S extends z.ZodType>(schema: S) => z.preprocess((v) => (v === '' ? undefined : v), schema);

/**
 * The embedded default's environment (DESIGN.md "Configuration"). Every
 * problem is reported at once, each naming its variable.
 */
export const embeddedConfigSchema = z
  .object({
    CTXFLOW_HOST: blank(z.string().min(1).default('127.0.0.1')),
    CTXFLOW_PORT: blank(z.coerce.number().int().min(0).max(65_535).default(8080)),
    CTXFLOW_API_KEYS: blank(z.string().optional()),
    CTXFLOW_FEED_SECRET_GENERIC: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_GITHUB: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_JIRA: blank(z.string().min(1).optional()),
    CTXFLOW_FEED_SECRET_ZENDESK: blank(z.string().min(1).optional()),
    CTXFLOW_LOG_LEVEL: blank(z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info')),
  })
  .transform((env, ctx) => {
    let apiKeys = new Map<string, string>();
    try {
      apiKeys = parseApiKeys(env.CTXFLOW_API_KEYS);
    } catch (err) {
      ctx.addIssue({
        code: 'custom',
        path: ['CTXFLOW_API_KEYS'],
        message: (err as Error).message.replace(/^CTXFLOW_API_KEYS: /, ''),
      });
    }
    if (apiKeys.size === 0 && !isLoopback(env.CTXFLOW_HOST)) {
      ctx.addIssue({
        code: 'custom',
        path: ['CTXFLOW_HOST'],
        message: `refusing to bind ${env.CTXFLOW_HOST} without CTXFLOW_API_KEYS: without keys only loopback is served`,
      });
    }
    const secrets: Partial<Record<FeedSource, string>> = {};
    for (const source of FEED_SOURCES) {
      const value = env[`CTXFLOW_FEED_SECRET_${source.toUpperCase()}` as keyof typeof env];
      if (typeof value === 'string') secrets[source] = value;
    }
    return { host: env.CTXFLOW_HOST, port: env.CTXFLOW_PORT, apiKeys, secrets, logLevel: env.CTXFLOW_LOG_LEVEL };
  });

export type EmbeddedConfig = Readonly<z.output<typeof embeddedConfigSchema>>;

export function loadEmbeddedConfig(env: Record<string, string | undefined>): EmbeddedConfig {
  try {
    return parseConfig(embeddedConfigSchema, env);
  } catch (err) {
    // Field errors stop zod before the cross-field checks: add those too, so every problem shows at once.
    if (!(err instanceof ConfigError)) throw err;
    const problems = [...err.problems];
    const host = env.CTXFLOW_HOST || '127.0.0.1';
    let keys = 0;
    try {
      keys = parseApiKeys(env.CTXFLOW_API_KEYS).size;
    } catch (keyErr) {
      if (!problems.some((p) => p.startsWith('CTXFLOW_API_KEYS'))) problems.push((keyErr as Error).message);
    }
    if (keys === 0 && !isLoopback(host) && !problems.some((p) => p.startsWith('CTXFLOW_HOST'))) {
      problems.push(
        `CTXFLOW_HOST: refusing to bind ${host} without CTXFLOW_API_KEYS: without keys only loopback is served`,
      );
    }
    throw new ConfigError(problems);
  }
}
