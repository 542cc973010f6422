import type { z } from 'zod';

/** A configuration refusal: every problem at once, each naming its variable. */
export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/**
 * Parses the environment once with a service's zod schema; the result is frozen.
 * Nothing else reads `process.env`.
 */
export function parseConfig<S extends z.ZodType>(
  schema: S,
  env: Record<string, string | undefined>,
): Readonly<z.infer<S>> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => `${issue.path.join('.') || 'environment'}: ${issue.message}`),
    );
  }
  return Object.freeze(parsed.data);
}

/**
 * Parses a service's schema and its credentials together, reporting every
 * problem at once: `CTXFLOW_API_KEYS` (`tenant:key,...`) must be well formed,
 * and without keys only a loopback `CTXFLOW_HOST` may be bound.
 */
export function parseConfigWithAuth<S extends z.ZodType>(
  schema: S,
  env: Record<string, string | undefined>,
  helpers: {
    parseApiKeys(raw: string | undefined): Map<string, string>;
    isLoopback(host: string): boolean;
  },
): Readonly<z.infer<S> & { apiKeys: Map<string, string> }> {
  const problems: string[] = [];
  let parsed: Readonly<z.infer<S>> | undefined;
  try {
    parsed = parseConfig(schema, env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    problems.push(...err.problems);
  }
  let apiKeys = new Map<string, string>();
  try {
    apiKeys = helpers.parseApiKeys(env.CTXFLOW_API_KEYS);
  } catch (err) {
    problems.push((err as Error).message);
  }
  const host = env.CTXFLOW_HOST || '127.0.0.1';
  if (apiKeys.size === 0 && !helpers.isLoopback(host) && !problems.some((p) => p.startsWith('CTXFLOW_HOST'))) {
    problems.push(
      `CTXFLOW_HOST: refusing to bind ${host} without CTXFLOW_API_KEYS: without keys only loopback is served`,
    );
  }
  if (problems.length > 0 || parsed === undefined) throw new ConfigError(problems);
  return Object.freeze({ ...(parsed as object), apiKeys }) as Readonly<z.infer<S> & { apiKeys: Map<string, string> }>;
}

/**
 * A composition root's first step: the parsed configuration, or the process
 * ends with exit code 2 and every problem on stderr, prefixed by the service.
 */
export function configOrExit<T>(service: string, load: () => T): T {
  try {
    return load();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${service}: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}
