import { spawnSync } from 'node:child_process';
import { loadEmbeddedConfig } from '@ctxflow/embedded';
import { ConfigError } from '@ctxflow/service-kit';
import { loadRunnerConfig } from '@ctxflow/session-runner';
import { loadStepContextConfig } from '@ctxflow/step-context';
import { describe, expect, it } from 'vitest';

function problems(env: Record<string, string>): string[] {
  try {
    loadEmbeddedConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe('configuration', () => {
  it('CTXFLOW_SESSION_TTL_MS: 30 days by default, 0 keeps sessions, a negative value names the variable', () => {
    const thirtyDays = 30 * 24 * 60 * 60 * 1000;
    expect(loadEmbeddedConfig({}).sessionTtlMs).toBe(thirtyDays);
    expect(loadRunnerConfig({}).sessionTtlMs).toBe(thirtyDays);
    expect(loadStepContextConfig({}).sessionTtlMs).toBe(thirtyDays);
    expect(loadRunnerConfig({ CTXFLOW_SESSION_TTL_MS: '0' }).sessionTtlMs).toBe(0);
    expect(loadStepContextConfig({ CTXFLOW_SESSION_TTL_MS: '60000' }).sessionTtlMs).toBe(60_000);
    expect(problems({ CTXFLOW_SESSION_TTL_MS: '-1' }).join('\n')).toContain('CTXFLOW_SESSION_TTL_MS');
  });

  it('defaults to loopback 127.0.0.1:8080 with no keys and no feeds', () => {
    const config = loadEmbeddedConfig({});
    expect(config.host).toBe('127.0.0.1');
    expect(config.port).toBe(8080);
    expect(config.apiKeys.size).toBe(0);
    expect(config.secrets).toEqual({});
  });

  it('parses API keys as tenant:key and feed secrets per source as tenant:secret pairs', () => {
    const config = loadEmbeddedConfig({
      CTXFLOW_API_KEYS: 'acme:k1, globex:k2',
      CTXFLOW_FEED_SECRET_GITHUB: 'acme:gh-a, globex:gh:g',
      CTXFLOW_HOST: '0.0.0.0',
    });
    expect([...config.apiKeys]).toEqual([
      ['k1', 'acme'],
      ['k2', 'globex'],
    ]);
    expect(config.secrets).toEqual({
      github: [
        { tenant: 'acme', secret: 'gh-a' },
        { tenant: 'globex', secret: 'gh:g' },
      ],
    });
    expect(config.host).toBe('0.0.0.0');
  });

  it("without API keys a plain secret is the default tenant's, as it is", () => {
    expect(loadEmbeddedConfig({ CTXFLOW_FEED_SECRET_GITHUB: 'gh:with,punctuation' }).secrets).toEqual({
      github: [{ tenant: 'default', secret: 'gh:with,punctuation' }],
    });
  });

  it('a plain secret with API keys is refused at config parse, naming the variable', () => {
    const found = problems({
      CTXFLOW_API_KEYS: 'ta:key-a,tb:key-b',
      CTXFLOW_FEED_SECRET_GENERIC: 'plain-secret',
      CTXFLOW_FEED_SECRET_JIRA: 'ta:jira-a,tc:jira-c',
      CTXFLOW_FEED_SECRET_ZENDESK: 'ta:same,tb:same',
      CTXFLOW_PORT: 'eighty',
    });
    expect(found).toEqual([
      'CTXFLOW_PORT: Invalid input: expected number, received NaN',
      'CTXFLOW_FEED_SECRET_GENERIC: with CTXFLOW_API_KEYS set, expected a list of tenant:secret pairs (e.g. ta:secret-a,tb:secret-b); a plain secret names no tenant',
      'CTXFLOW_FEED_SECRET_JIRA: tenant "tc" has no key in CTXFLOW_API_KEYS (a plain secret containing ":" is refused too)',
      'CTXFLOW_FEED_SECRET_ZENDESK: one secret is given to tenants "ta" and "tb": a secret must name one tenant',
    ]);
    // No secret is echoed.
    expect(found.join('\n')).not.toMatch(/plain-secret|jira-c|same,/);
  });

  it('reports every bad variable at once, each by name', () => {
    expect(problems({ CTXFLOW_PORT: 'eighty', CTXFLOW_API_KEYS: 'nocolon', CTXFLOW_LOG_LEVEL: 'loud' })).toEqual([
      'CTXFLOW_PORT: Invalid input: expected number, received NaN',
      'CTXFLOW_LOG_LEVEL: Invalid option: expected one of "fatal"|"error"|"warn"|"info"|"debug"|"trace"|"silent"',
      'CTXFLOW_API_KEYS: each entry must be tenant:key',
    ]);
  });

  it('the session-runner holds 1,000 sessions unless told; a bad count names its variable', () => {
    expect(loadRunnerConfig({}).heldSessions).toBe(1_000);
    // Unset: the held states' budget follows the heap cap (caching-session-store.ts defaultHeldBytes).
    expect(loadRunnerConfig({}).heldBytes).toBeUndefined();
    expect(loadRunnerConfig({ CTXFLOW_HELD_BYTES: String(64 * 1024 * 1024) }).heldBytes).toBe(64 * 1024 * 1024);
    expect(() => loadRunnerConfig({ CTXFLOW_HELD_BYTES: 'lots' })).toThrow(/CTXFLOW_HELD_BYTES/);
    expect(loadRunnerConfig({ CTXFLOW_HELD_SESSIONS: '0' }).heldSessions).toBe(0);
    expect(() => loadRunnerConfig({ CTXFLOW_HELD_SESSIONS: '-1' })).toThrow(/CTXFLOW_HELD_SESSIONS/);
  });

  it('refuses a non-loopback host without API keys', () => {
    expect(problems({ CTXFLOW_HOST: '0.0.0.0' })).toEqual([
      'CTXFLOW_HOST: refusing to bind 0.0.0.0 without CTXFLOW_API_KEYS: without keys only loopback is served',
    ]);
  });

  it('a bad value stops npm start with a message naming the variable (exit 2)', () => {
    const run = spawnSync(process.execPath, ['services/embedded/src/main.ts'], {
      env: { ...process.env, CTXFLOW_PORT: '70000' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('CTXFLOW_PORT:');
  });

  it('a plain feed secret with API keys stops npm start naming the variable (exit 2)', () => {
    const run = spawnSync(process.execPath, ['services/embedded/src/main.ts'], {
      env: { ...process.env, CTXFLOW_API_KEYS: 'ta:key-a', CTXFLOW_FEED_SECRET_GENERIC: 'plain-secret' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain(
      'CTXFLOW_FEED_SECRET_GENERIC: with CTXFLOW_API_KEYS set, expected a list of tenant:secret pairs',
    );
    expect(run.stderr).not.toContain('plain-secret');
  });
});
