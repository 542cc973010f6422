/**
 * Secured connections to Kafka and Redis, from `KAFKA_*` and `REDIS_*`
 * variables: TLS (CA, client certificate and key, read from files at start),
 * SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER) and Redis ACL users.
 * Secrets come from a variable or a file (`*_FILE`), are held as {@link Secret}
 * (which never serializes) and are revealed only to the client libraries.
 */
import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import { z } from 'zod';
import { blank } from './blank.ts';

/** A secret value: `reveal()` gives it; JSON, `String()` and `util.inspect` give `[redacted]`. */
export class Secret {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  reveal(): string {
    return this.#value;
  }
  toJSON(): string {
    return '[redacted]';
  }
  toString(): string {
    return '[redacted]';
  }
  [inspect.custom](): string {
    return '[redacted]';
  }
}

export type KafkaSaslMechanism = 'plain' | 'scram-sha-256' | 'scram-sha-512' | 'oauthbearer';

/** TLS material, PEM text read at start. */
export interface TlsFiles {
  ca?: string;
  cert?: string;
  key?: Secret;
}

export interface KafkaSecurity {
  tls?: TlsFiles;
  sasl?:
    | { mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512'; username: string; password: Secret }
    /** The token is read from `tokenFile` at every authentication (a rotated token is picked up). */
    | { mechanism: 'oauthbearer'; tokenFile: string };
  /** The variables a refusal names: where the credentials and the CA came from. */
  names: { credentials: string; ca: string };
}

export interface RedisSecurity {
  tls?: TlsFiles;
  username?: string;
  password?: Secret;
  names: { credentials: string; ca: string };
}

const flagVar = () =>
  blank(
    z
      .enum(['true', 'false', '1', '0'], { message: 'expected true or false' })
      .transform((v) => v === 'true' || v === '1')
      .default(false),
  );

/** The text of a file named by a variable, read now; a file that cannot be read is a problem of that variable. */
function readVarFile(path: string, ctx: z.RefinementCtx): string | typeof z.NEVER {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    ctx.addIssue({ code: 'custom', message: `cannot read ${path} (${code})` });
    return z.NEVER;
  }
}

/** A PEM file (certificate, CA bundle or key), read at start. */
const pemFileVar = (what: string) =>
  blank(
    z
      .string()
      .transform((path, ctx) => {
        const text = readVarFile(path, ctx);
        if (typeof text === 'string' && !text.includes('-----BEGIN ')) {
          ctx.addIssue({ code: 'custom', message: `${path} holds no PEM ${what}` });
          return z.NEVER;
        }
        return text;
      })
      .optional(),
  );

/** A secret in a file (a mounted Kubernetes secret): its text without one trailing newline. */
const secretFileVar = () =>
  blank(
    z
      .string()
      .transform((path, ctx) => {
        const text = readVarFile(path, ctx);
        if (typeof text !== 'string') return z.NEVER;
        const value = text.replace(/\r?\n$/, '');
        if (value === '') {
          ctx.addIssue({ code: 'custom', message: `${path} is empty` });
          return z.NEVER;
        }
        return new Secret(value);
      })
      .optional(),
  );

/** A file that must be readable now and is read again later (a token that rotates). */
const readableFileVar = () =>
  blank(
    z
      .string()
      .transform((path, ctx) => {
        const text = readVarFile(path, ctx);
        return typeof text === 'string' ? path : z.NEVER;
      })
      .optional(),
  );

const secretVar = () =>
  blank(
    z
      .string()
      .transform((value) => new Secret(value))
      .optional(),
  );

/**
 * The variables of secured connections, spread into a service's schema next
 * to `KAFKA_BROKERS` and `REDIS_URL`; {@link connectionSecurity} turns them
 * into the options, in the schema's transform.
 */
export const connectionSecurityVars = () => ({
  KAFKA_SSL: flagVar(),
  KAFKA_SSL_CA_FILE: pemFileVar('certificate'),
  KAFKA_SSL_CERT_FILE: pemFileVar('certificate'),
  KAFKA_SSL_KEY_FILE: pemFileVar('private key'),
  KAFKA_SASL_MECHANISM: blank(
    z
      .string()
      .transform((v) => v.toLowerCase())
      .pipe(
        z.enum(['plain', 'scram-sha-256', 'scram-sha-512', 'oauthbearer'], {
          message: 'expected PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER',
        }),
      )
      .optional(),
  ),
  KAFKA_SASL_USERNAME: blank(z.string().optional()),
  KAFKA_SASL_PASSWORD: secretVar(),
  KAFKA_SASL_PASSWORD_FILE: secretFileVar(),
  KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: readableFileVar(),
  REDIS_TLS: flagVar(),
  REDIS_TLS_CA_FILE: pemFileVar('certificate'),
  REDIS_TLS_CERT_FILE: pemFileVar('certificate'),
  REDIS_TLS_KEY_FILE: pemFileVar('private key'),
  REDIS_USERNAME: blank(z.string().optional()),
  REDIS_PASSWORD: secretVar(),
  REDIS_PASSWORD_FILE: secretFileVar(),
});

type SecurityEnv = z.output<z.ZodObject<ReturnType<typeof connectionSecurityVars>>> & {
  REDIS_URL?: string | undefined;
  REDIS_CLUSTER_NODES?: string[] | undefined;
};

function problem(ctx: z.RefinementCtx, variable: string, message: string): void {
  ctx.addIssue({ code: 'custom', path: [variable], message });
}

function tlsFiles(ca: string | undefined, cert: string | undefined, key: string | undefined): TlsFiles {
  const files: TlsFiles = {};
  if (ca !== undefined) files.ca = ca;
  if (cert !== undefined) files.cert = cert;
  if (key !== undefined) files.key = new Secret(key);
  return files;
}

/**
 * The Kafka and Redis security of a parsed environment, for a schema's
 * transform: every inconsistency is a problem naming its variable.
 */
export function connectionSecurity(
  env: SecurityEnv,
  ctx: z.RefinementCtx,
): { kafkaSecurity: KafkaSecurity; redisSecurity: RedisSecurity } {
  // Kafka TLS
  const kafkaTlsFiles = (['KAFKA_SSL_CA_FILE', 'KAFKA_SSL_CERT_FILE', 'KAFKA_SSL_KEY_FILE'] as const).filter(
    (name) => env[name] !== undefined,
  );
  if (!env.KAFKA_SSL) {
    for (const name of kafkaTlsFiles) problem(ctx, name, 'set, but KAFKA_SSL is not true');
  }
  if ((env.KAFKA_SSL_CERT_FILE === undefined) !== (env.KAFKA_SSL_KEY_FILE === undefined)) {
    const missing = env.KAFKA_SSL_CERT_FILE === undefined ? 'KAFKA_SSL_CERT_FILE' : 'KAFKA_SSL_KEY_FILE';
    problem(ctx, missing, 'a client certificate needs both KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE');
  }
  const kafkaSecurity: KafkaSecurity = {
    names: { credentials: 'KAFKA_SASL_PASSWORD', ca: 'KAFKA_SSL_CA_FILE' },
  };
  if (env.KAFKA_SSL)
    kafkaSecurity.tls = tlsFiles(env.KAFKA_SSL_CA_FILE, env.KAFKA_SSL_CERT_FILE, env.KAFKA_SSL_KEY_FILE);

  // Kafka SASL
  const mechanism = env.KAFKA_SASL_MECHANISM;
  const credentialVars = (
    [
      'KAFKA_SASL_USERNAME',
      'KAFKA_SASL_PASSWORD',
      'KAFKA_SASL_PASSWORD_FILE',
      'KAFKA_SASL_OAUTHBEARER_TOKEN_FILE',
    ] as const
  ).filter((name) => env[name] !== undefined);
  if (env.KAFKA_SASL_PASSWORD !== undefined && env.KAFKA_SASL_PASSWORD_FILE !== undefined) {
    problem(ctx, 'KAFKA_SASL_PASSWORD_FILE', 'give the password once: KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE');
  }
  if (mechanism === undefined) {
    for (const name of credentialVars) problem(ctx, name, 'set, but KAFKA_SASL_MECHANISM is not');
  } else if (mechanism === 'oauthbearer') {
    for (const name of credentialVars) {
      if (name !== 'KAFKA_SASL_OAUTHBEARER_TOKEN_FILE') problem(ctx, name, 'not used with OAUTHBEARER');
    }
    if (env.KAFKA_SASL_OAUTHBEARER_TOKEN_FILE === undefined) {
      problem(ctx, 'KAFKA_SASL_OAUTHBEARER_TOKEN_FILE', 'required with KAFKA_SASL_MECHANISM=OAUTHBEARER');
    } else {
      kafkaSecurity.sasl = { mechanism, tokenFile: env.KAFKA_SASL_OAUTHBEARER_TOKEN_FILE };
      kafkaSecurity.names.credentials = 'KAFKA_SASL_OAUTHBEARER_TOKEN_FILE';
    }
  } else {
    if (env.KAFKA_SASL_OAUTHBEARER_TOKEN_FILE !== undefined) {
      problem(ctx, 'KAFKA_SASL_OAUTHBEARER_TOKEN_FILE', 'used only with KAFKA_SASL_MECHANISM=OAUTHBEARER');
    }
    const password = env.KAFKA_SASL_PASSWORD ?? env.KAFKA_SASL_PASSWORD_FILE;
    if (env.KAFKA_SASL_USERNAME === undefined) {
      problem(ctx, 'KAFKA_SASL_USERNAME', `required with KAFKA_SASL_MECHANISM=${mechanism.toUpperCase()}`);
    }
    if (password === undefined) {
      problem(
        ctx,
        'KAFKA_SASL_PASSWORD',
        `required (or KAFKA_SASL_PASSWORD_FILE) with KAFKA_SASL_MECHANISM=${mechanism.toUpperCase()}`,
      );
    }
    if (env.KAFKA_SASL_USERNAME !== undefined && password !== undefined) {
      kafkaSecurity.sasl = { mechanism, username: env.KAFKA_SASL_USERNAME, password };
    }
    if (env.KAFKA_SASL_PASSWORD_FILE !== undefined) kafkaSecurity.names.credentials = 'KAFKA_SASL_PASSWORD_FILE';
  }

  // Redis: TLS by a rediss:// URL, or REDIS_TLS=true (the only way for REDIS_CLUSTER_NODES).
  const url = env.REDIS_URL === undefined ? undefined : new URL(env.REDIS_URL);
  if (url?.protocol === 'redis:' && env.REDIS_TLS) {
    problem(ctx, 'REDIS_TLS', 'REDIS_URL is redis:// (plaintext): use a rediss:// URL for TLS');
  }
  const redisTls = url?.protocol === 'rediss:' || env.REDIS_TLS;
  const redisTlsFiles = (['REDIS_TLS_CA_FILE', 'REDIS_TLS_CERT_FILE', 'REDIS_TLS_KEY_FILE'] as const).filter(
    (name) => env[name] !== undefined,
  );
  if (!redisTls) {
    for (const name of redisTlsFiles) problem(ctx, name, 'set, but Redis is not on TLS (rediss:// or REDIS_TLS=true)');
  }
  if ((env.REDIS_TLS_CERT_FILE === undefined) !== (env.REDIS_TLS_KEY_FILE === undefined)) {
    const missing = env.REDIS_TLS_CERT_FILE === undefined ? 'REDIS_TLS_CERT_FILE' : 'REDIS_TLS_KEY_FILE';
    problem(ctx, missing, 'a client certificate needs both REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE');
  }
  const redisSecurity: RedisSecurity = { names: { credentials: 'REDIS_PASSWORD', ca: 'REDIS_TLS_CA_FILE' } };
  if (redisTls) redisSecurity.tls = tlsFiles(env.REDIS_TLS_CA_FILE, env.REDIS_TLS_CERT_FILE, env.REDIS_TLS_KEY_FILE);
  if (env.REDIS_PASSWORD !== undefined && env.REDIS_PASSWORD_FILE !== undefined) {
    problem(ctx, 'REDIS_PASSWORD_FILE', 'give the password once: REDIS_PASSWORD or REDIS_PASSWORD_FILE');
  }
  const password = env.REDIS_PASSWORD ?? env.REDIS_PASSWORD_FILE;
  const urlUser = url?.username ? decodeURIComponent(url.username) : undefined;
  const urlPassword = url?.password ? decodeURIComponent(url.password) : undefined;
  if (urlPassword !== undefined && password !== undefined) {
    problem(ctx, 'REDIS_PASSWORD', 'REDIS_URL has a password too: give it once');
  }
  if (urlUser !== undefined && env.REDIS_USERNAME !== undefined) {
    problem(ctx, 'REDIS_USERNAME', 'REDIS_URL has a user too: give it once');
  }
  const username = env.REDIS_USERNAME ?? urlUser;
  if (username !== undefined) redisSecurity.username = username;
  if (password !== undefined) redisSecurity.password = password;
  else if (urlPassword !== undefined) redisSecurity.password = new Secret(urlPassword);
  if (env.REDIS_PASSWORD_FILE !== undefined) redisSecurity.names.credentials = 'REDIS_PASSWORD_FILE';
  else if (urlPassword !== undefined) redisSecurity.names.credentials = 'REDIS_URL';
  if (redisSecurity.username !== undefined && redisSecurity.password === undefined) {
    problem(ctx, 'REDIS_PASSWORD', 'a Redis ACL user needs a password (REDIS_PASSWORD or REDIS_PASSWORD_FILE)');
  }
  return { kafkaSecurity, redisSecurity };
}

/** A URL as it may be shown: its password (if any) replaced by `***`; text that is not a URL is shown as `[unparsable URL]`. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return '[unparsable URL]';
  }
}

/** tls.connect options from the files: the server's certificate is always verified. */
export function tlsOptions(files: TlsFiles): { ca?: string; cert?: string; key?: string; rejectUnauthorized: true } {
  return {
    ...(files.ca !== undefined ? { ca: files.ca } : {}),
    ...(files.cert !== undefined ? { cert: files.cert } : {}),
    ...(files.key !== undefined ? { key: files.key.reveal() } : {}),
    rejectUnauthorized: true,
  };
}

/**
 * The `tls` and `sasl` options of the bus (`KafkaBusOptions` in @ctxflow/bus):
 * secrets revealed here, for the client only.
 */
export function kafkaBusSecurity(security: KafkaSecurity): {
  tls?: { ca?: string; cert?: string; key?: string };
  sasl?:
    | { mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512'; username: string; password: string }
    | { mechanism: 'oauthbearer'; token: () => string };
} {
  const options: ReturnType<typeof kafkaBusSecurity> = {};
  if (security.tls !== undefined) {
    const { rejectUnauthorized: _, ...tls } = tlsOptions(security.tls);
    options.tls = tls;
  }
  const sasl = security.sasl;
  if (sasl?.mechanism === 'oauthbearer') {
    const { tokenFile } = sasl;
    options.sasl = { mechanism: 'oauthbearer', token: () => readFileSync(tokenFile, 'utf8').trim() };
  } else if (sasl !== undefined) {
    options.sasl = { mechanism: sasl.mechanism, username: sasl.username, password: sasl.password.reveal() };
  }
  return options;
}
