/**
 * Secured-connection variables as every stack service parses them: files read
 * at start, every problem at once naming its variable, secrets that never
 * serialize, and the options each client gets.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { inspect } from 'node:util';
import { loadFeedConfig } from '@ctxflow/feed-ingestor';
import {
  ConfigError,
  createLogger,
  explainConnectionFailure,
  kafkaBusSecurity,
  redactUrl,
  Secret,
} from '@ctxflow/service-kit';
import { loadRunnerConfig } from '@ctxflow/session-runner';
import { loadStepContextConfig } from '@ctxflow/step-context';
import { afterAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'ctxflow-security-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const KEY = '-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n';
function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}
const caFile = file('ca.pem', PEM);
const certFile = file('client.pem', PEM);
const keyFile = file('client.key', KEY);

function problemsOf(load: () => unknown): string[] {
  try {
    load();
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

const loaders = {
  'feed-ingestor': loadFeedConfig,
  'session-runner': loadRunnerConfig,
  'step-context': loadStepContextConfig,
} as const;

describe('secured connections: configuration', () => {
  for (const [service, load] of Object.entries(loaders)) {
    it(`${service}: TLS files are read at start and SASL SCRAM takes the password from its file`, () => {
      const config = load({
        KAFKA_BROKERS: 'kafka.example:9093',
        KAFKA_SSL: 'true',
        KAFKA_SSL_CA_FILE: caFile,
        KAFKA_SSL_CERT_FILE: certFile,
        KAFKA_SSL_KEY_FILE: keyFile,
        KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
        KAFKA_SASL_USERNAME: 'ctxflow',
        KAFKA_SASL_PASSWORD_FILE: file(`${service}-password`, 's3cret-kafka\n'),
        REDIS_URL: 'rediss://redis.example:6380',
        REDIS_TLS_CA_FILE: caFile,
        REDIS_USERNAME: 'app',
        REDIS_PASSWORD: 's3cret-redis',
      });
      expect(kafkaBusSecurity(config.kafkaSecurity)).toEqual({
        tls: { ca: PEM, cert: PEM, key: KEY },
        sasl: { mechanism: 'scram-sha-512', username: 'ctxflow', password: 's3cret-kafka' },
      });
      expect(config.kafkaSecurity.names.credentials).toBe('KAFKA_SASL_PASSWORD_FILE');
      expect(config.redisSecurity.tls).toEqual({ ca: PEM });
      expect(config.redisSecurity.username).toBe('app');
      expect(config.redisSecurity.password?.reveal()).toBe('s3cret-redis');
      // The parsed configuration, however it is printed, holds no secret.
      for (const printed of [
        JSON.stringify(config),
        inspect(config, { depth: 10 }),
        String(config.redisSecurity.password),
      ]) {
        expect(printed).not.toContain('s3cret');
        expect(printed).not.toContain('MIIE');
      }
    });

    it(`${service}: every problem at once, each naming its variable; a missing file names the variable`, () => {
      const problems = problemsOf(() =>
        load({
          KAFKA_SSL_CA_FILE: join(dir, 'missing-ca.pem'),
          KAFKA_SSL_CERT_FILE: certFile,
          KAFKA_SASL_MECHANISM: 'GSSAPI',
          KAFKA_SASL_PASSWORD_FILE: join(dir, 'missing-password'),
          REDIS_TLS_CA_FILE: file(`${service}-not-pem`, 'hello'),
          REDIS_PASSWORD: 'p',
          REDIS_PASSWORD_FILE: join(dir, 'missing-redis-password'),
        }),
      );
      expect(problems).toEqual(
        expect.arrayContaining([
          `KAFKA_SSL_CA_FILE: cannot read ${join(dir, 'missing-ca.pem')} (ENOENT)`,
          'KAFKA_SASL_MECHANISM: expected PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER',
          `KAFKA_SASL_PASSWORD_FILE: cannot read ${join(dir, 'missing-password')} (ENOENT)`,
          `REDIS_TLS_CA_FILE: ${join(dir, `${service}-not-pem`)} holds no PEM certificate`,
          `REDIS_PASSWORD_FILE: cannot read ${join(dir, 'missing-redis-password')} (ENOENT)`,
        ]),
      );
      expect(problems).toHaveLength(5);
    });

    it(`${service}: inconsistent settings are refused together, each naming its variable`, () => {
      const problems = problemsOf(() =>
        load({
          KAFKA_SSL_CA_FILE: caFile,
          KAFKA_SSL_KEY_FILE: keyFile,
          KAFKA_SASL_MECHANISM: 'plain',
          KAFKA_SASL_PASSWORD: 'p',
          KAFKA_SASL_PASSWORD_FILE: file(`${service}-pw`, 'p'),
          REDIS_URL: 'redis://redis.example:6379',
          REDIS_TLS_CA_FILE: caFile,
          REDIS_USERNAME: 'app',
        }),
      );
      expect(problems.sort()).toEqual(
        [
          'KAFKA_SSL_CA_FILE: set, but KAFKA_SSL is not true',
          'KAFKA_SSL_KEY_FILE: set, but KAFKA_SSL is not true',
          'KAFKA_SSL_CERT_FILE: a client certificate needs both KAFKA_SSL_CERT_FILE and KAFKA_SSL_KEY_FILE',
          'KAFKA_SASL_PASSWORD_FILE: give the password once: KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE',
          'KAFKA_SASL_USERNAME: required with KAFKA_SASL_MECHANISM=PLAIN',
          'REDIS_TLS_CA_FILE: set, but Redis is not on TLS (rediss:// or REDIS_TLS=true)',
          'REDIS_PASSWORD: a Redis ACL user needs a password (REDIS_PASSWORD or REDIS_PASSWORD_FILE)',
        ].sort(),
      );
    });
  }

  it('OAUTHBEARER needs its token file, which is read again at every authentication', async () => {
    expect(problemsOf(() => loadRunnerConfig({ KAFKA_SASL_MECHANISM: 'OAUTHBEARER' }))).toEqual([
      'KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: required with KAFKA_SASL_MECHANISM=OAUTHBEARER',
    ]);
    const tokenFile = file('token', 'first-token\n');
    const config = loadRunnerConfig({
      KAFKA_SASL_MECHANISM: 'OAUTHBEARER',
      KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: tokenFile,
    });
    const { sasl } = kafkaBusSecurity(config.kafkaSecurity);
    if (sasl?.mechanism !== 'oauthbearer') throw new Error('expected OAUTHBEARER');
    expect(sasl.token()).toBe('first-token');
    writeFileSync(tokenFile, 'rotated-token');
    expect(sasl.token()).toBe('rotated-token');
  });

  it('Redis credentials in the URL are taken from it; given twice they are refused', () => {
    const config = loadStepContextConfig({ REDIS_URL: 'rediss://app:url%40pass@redis.example:6380' });
    expect(config.redisSecurity.username).toBe('app');
    expect(config.redisSecurity.password?.reveal()).toBe('url@pass');
    expect(config.redisSecurity.names.credentials).toBe('REDIS_URL');
    expect(
      problemsOf(() => loadStepContextConfig({ REDIS_URL: 'rediss://app:p@redis.example:6380', REDIS_PASSWORD: 'q' })),
    ).toEqual(['REDIS_PASSWORD: REDIS_URL has a password too: give it once']);
  });

  it('REDIS_TLS=true puts a Redis Cluster on TLS; with a redis:// URL it is refused', () => {
    const config = loadRunnerConfig({
      REDIS_CLUSTER_NODES: '10.0.0.1:6379,10.0.0.2:6379',
      REDIS_TLS: 'true',
      REDIS_TLS_CA_FILE: caFile,
    });
    expect(config.redisSecurity.tls).toEqual({ ca: PEM });
    expect(problemsOf(() => loadRunnerConfig({ REDIS_URL: 'redis://r:6379', REDIS_TLS: 'true' }))).toEqual([
      'REDIS_TLS: REDIS_URL is redis:// (plaintext): use a rediss:// URL for TLS',
    ]);
  });

  it('a logged configuration or credential object shows no secret (Secret values, pino redaction)', () => {
    const lines: string[] = [];
    const logger = createLogger({
      service: 'test',
      destination: new Writable({
        write(chunk, _encoding, done) {
          lines.push(chunk.toString());
          done();
        },
      }),
    });
    const config = loadStepContextConfig({
      KAFKA_SASL_MECHANISM: 'PLAIN',
      KAFKA_SASL_USERNAME: 'u',
      KAFKA_SASL_PASSWORD: 'kafka-pw-123',
      REDIS_URL: 'rediss://app:redis-pw-456@redis.example:6380',
    });
    logger.info({ config }, 'config');
    logger.info({ sasl: kafkaBusSecurity(config.kafkaSecurity).sasl }, 'sasl');
    logger.info({ options: { password: 'plain-pw-789', redisUrl: 'rediss://app:redis-pw-456@r:1' } }, 'options');
    const text = lines.join('');
    expect(lines).toHaveLength(3);
    for (const secret of ['kafka-pw-123', 'redis-pw-456', 'plain-pw-789']) expect(text).not.toContain(secret);
  });

  it('start failures name the variable: refused credentials and untrusted certificates, through wrappers', () => {
    const security = { names: { credentials: 'KAFKA_SASL_PASSWORD_FILE', ca: 'KAFKA_SSL_CA_FILE' }, tls: {} };
    const tlsError = Object.assign(new Error('self-signed certificate in certificate chain'), {
      code: 'SELF_SIGNED_CERT_IN_CHAIN',
    });
    expect(
      explainConnectionFailure(new Error('ensureTopics failed', { cause: { errors: [tlsError] } }), 'Kafka', security),
    ).toBe(
      "KAFKA_SSL_CA_FILE: the Kafka server's certificate is not trusted (self-signed certificate in certificate chain): set KAFKA_SSL_CA_FILE to the CA that signed it",
    );
    expect(
      explainConnectionFailure(
        new Error('x', { cause: new Error('SASL SCRAM-SHA-512 authentication failed: Authentication failed') }),
        'Kafka',
        security,
      ),
    ).toMatch(/^KAFKA_SASL_PASSWORD_FILE: Kafka refused the credentials/);
    expect(explainConnectionFailure(new Error('connect ECONNREFUSED 127.0.0.1:9092'), 'Kafka', security)).toBe(
      undefined,
    );
  });

  it('redactUrl: a Redis URL as `npm run stack` prints it keeps its user and hides its password', () => {
    expect(redactUrl('rediss://app:s3cret@redis.example:6380/0')).toBe('rediss://app:***@redis.example:6380/0');
    expect(redactUrl('redis://127.0.0.1:6379')).toBe('redis://127.0.0.1:6379');
    expect(redactUrl('not a url s3cret')).toBe('[unparsable URL]');
  });

  it('Secret: reveal() gives the value; JSON, String and inspect never do', () => {
    const secret = new Secret('hunter2');
    expect(secret.reveal()).toBe('hunter2');
    expect(JSON.stringify({ secret })).toBe('{"secret":"[redacted]"}');
    expect(`${secret}`).toBe('[redacted]');
    expect(inspect({ secret })).not.toContain('hunter2');
  });
});
