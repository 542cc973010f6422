import { loadFeedConfig } from '@ctxflow/feed-ingestor';
import { ConfigError } from '@ctxflow/service-kit';
import { describe, expect, it } from 'vitest';

describe('feed-ingestor configuration', () => {
  it('defaults: 127.0.0.1:8081, 256 KiB bodies, no feeds, in-memory bus and ledger', () => {
    const config = loadFeedConfig({ PATH: '/usr/bin' });
    expect(config).toEqual({
      host: '127.0.0.1',
      port: 8081,
      secrets: {},
      maxBodyBytes: 262_144,
      dedupeTtlMs: 259_200_000,
      leaseMs: 30_000,
      redisPrefix: 'ctxflow',
      kafkaBrokers: undefined,
      kafkaClient: 'platformatic',
      kafkaTopicPrefix: '',
      ticketUpdatePartitions: 12,
      logLevel: 'info',
      shutdownGraceMs: 30_000,
      redisUrl: undefined,
      redisClusterNodes: undefined,
      // No TLS, no SASL, no Redis user: only the variables a refusal would name.
      kafkaSecurity: { names: { credentials: 'KAFKA_SASL_PASSWORD', ca: 'KAFKA_SSL_CA_FILE' } },
      redisSecurity: { names: { credentials: 'REDIS_PASSWORD', ca: 'REDIS_TLS_CA_FILE' } },
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('secrets per source; an empty secret leaves that feed off', () => {
    const config = loadFeedConfig({
      CTXFLOW_FEED_SECRET_GITHUB: 'gh',
      CTXFLOW_FEED_SECRET_ZENDESK: 'zd',
      CTXFLOW_FEED_SECRET_JIRA: '',
      KAFKA_BROKERS: '10.0.0.1:9092, 10.0.0.2:9092',
      REDIS_URL: 'redis://10.0.0.3:6379',
      CTXFLOW_FEED_MAX_BYTES: '65536',
    });
    expect(config.secrets).toEqual({
      github: [{ tenant: 'default', secret: 'gh' }],
      zendesk: [{ tenant: 'default', secret: 'zd' }],
    });
    expect(config.kafkaBrokers).toEqual(['10.0.0.1:9092', '10.0.0.2:9092']);
    expect(config.redisUrl).toBe('redis://10.0.0.3:6379');
    expect(config.maxBodyBytes).toBe(65_536);
  });

  it('CTXFLOW_FEED_LEASE_MS: 30 s by default, 1 s to 10 min; a value outside names the variable', () => {
    expect(loadFeedConfig({}).leaseMs).toBe(30_000);
    expect(loadFeedConfig({ CTXFLOW_FEED_LEASE_MS: '' }).leaseMs).toBe(30_000);
    expect(loadFeedConfig({ CTXFLOW_FEED_LEASE_MS: '5000' }).leaseMs).toBe(5_000);
    expect(loadFeedConfig({ CTXFLOW_FEED_LEASE_MS: '1000' }).leaseMs).toBe(1_000);
    expect(loadFeedConfig({ CTXFLOW_FEED_LEASE_MS: '600000' }).leaseMs).toBe(600_000);
    for (const bad of ['999', '600001', '2.5s', '1500.5', '-1']) {
      let error: unknown;
      try {
        loadFeedConfig({ CTXFLOW_FEED_LEASE_MS: bad });
      } catch (err) {
        error = err;
      }
      expect(error, bad).toBeInstanceOf(ConfigError);
      expect(
        (error as ConfigError).problems.map((p) => p.split(':')[0]),
        bad,
      ).toEqual(['CTXFLOW_FEED_LEASE_MS']);
    }
  });

  it('REDIS_CLUSTER_NODES: the delivery ledger on a Redis Cluster, as the other services take it', () => {
    const config = loadFeedConfig({ REDIS_CLUSTER_NODES: '10.0.0.4:7001, 10.0.0.5:7002' });
    expect(config.redisClusterNodes).toEqual(['10.0.0.4:7001', '10.0.0.5:7002']);
    expect(config.redisUrl).toBeUndefined();
  });

  it('every problem is reported at once, each naming its variable', () => {
    let error: unknown;
    try {
      loadFeedConfig({
        CTXFLOW_FEED_PORT: 'eighty',
        KAFKA_BROKERS: 'no-port',
        REDIS_URL: 'http://x',
        KAFKA_CLIENT: 'rdkafka',
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.map((p) => p.split(':')[0]);
    expect(problems.sort()).toEqual(['CTXFLOW_FEED_PORT', 'KAFKA_BROKERS.0', 'KAFKA_CLIENT', 'REDIS_URL']);
  });

  it('with CTXFLOW_API_KEYS every secret is a list of tenant:secret pairs naming tenants of those keys', () => {
    const config = loadFeedConfig({
      CTXFLOW_API_KEYS: 'ta:key-a,tb:key-b',
      CTXFLOW_FEED_SECRET_GENERIC: 'ta:secret-a,tb:secret-b,ta:secret-a2',
    });
    expect(config.secrets).toEqual({
      generic: [
        { tenant: 'ta', secret: 'secret-a' },
        { tenant: 'tb', secret: 'secret-b' },
        { tenant: 'ta', secret: 'secret-a2' },
      ],
    });
  });

  it('a plain secret with API keys is refused at config parse, naming the variable', () => {
    let error: unknown;
    try {
      loadFeedConfig({
        CTXFLOW_API_KEYS: 'ta:key-a,tb:key-b',
        CTXFLOW_FEED_SECRET_GENERIC: 'plain-secret',
        CTXFLOW_FEED_SECRET_GITHUB: 'ta:gh-a,tb:',
        CTXFLOW_FEED_SECRET_JIRA: `${'t'.repeat(257)}:jira`,
        CTXFLOW_FEED_PORT: 'eighty',
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      'CTXFLOW_FEED_PORT: Invalid input: expected number, received NaN',
      'CTXFLOW_FEED_SECRET_GENERIC: with CTXFLOW_API_KEYS set, expected a list of tenant:secret pairs (e.g. ta:secret-a,tb:secret-b); a plain secret names no tenant',
      'CTXFLOW_FEED_SECRET_GITHUB: each entry must be tenant:secret, with neither part empty',
      "CTXFLOW_FEED_SECRET_JIRA: a tenant is longer than 256 characters (the TicketUpdate's limit)",
    ]);
    expect((error as ConfigError).message).not.toContain('plain-secret');
  });

  it('two secrets per tenant (rotation); a third, or a whsec_ secret that is not base64, names the variable only', () => {
    let error: unknown;
    try {
      loadFeedConfig({
        CTXFLOW_API_KEYS: 'ta:key-a,tb:key-b',
        CTXFLOW_FEED_SECRET_GENERIC: 'ta:old-a,ta:new-a,tb:only-b',
        CTXFLOW_FEED_SECRET_INCIDENTIO: 'ta:whsec_b2xk,ta:whsec_bmV3,ta:whsec_dGhpcmQ=',
        CTXFLOW_FEED_SECRET_SERVICENOW: 'tb:whsec_not*base64',
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      'CTXFLOW_FEED_SECRET_INCIDENTIO: tenant "ta" has more than 2 secrets: at most two per tenant (the current one and the next, while it rotates)',
      'CTXFLOW_FEED_SECRET_SERVICENOW: tenant "tb": a secret starting whsec_ (Standard Webhooks) must be followed by its key in base64',
    ]);
    for (const value of ['dGhpcmQ=', 'not*base64', 'old-a'])
      expect((error as ConfigError).message).not.toContain(value);
    expect(
      loadFeedConfig({
        CTXFLOW_API_KEYS: 'ta:key-a,tb:key-b',
        CTXFLOW_FEED_SECRET_GENERIC: 'ta:old-a,ta:new-a,ta:old-a',
      }).secrets,
    ).toEqual({
      generic: [
        { tenant: 'ta', secret: 'old-a' },
        { tenant: 'ta', secret: 'new-a' },
      ],
    });
  });

  it('a malformed CTXFLOW_API_KEYS is reported with the rest', () => {
    expect(() => loadFeedConfig({ CTXFLOW_API_KEYS: 'nocolon' })).toThrow(
      'CTXFLOW_API_KEYS: each entry must be tenant:key',
    );
  });
});
