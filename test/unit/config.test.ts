import { spawnSync } from 'node:child_process';
import { loadEmbeddedConfig } from '@ctxflow/embedded';
import { ConfigError } from '@ctxflow/service-kit';
import { loadRunnerConfig } from '@ctxflow/session-runner';
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
  it('defaults to loopback 127.0.0.1:8080 with no keys and no feeds', () => {
    const config = loadEmbeddedConfig({});
    expect(config.host).toBe('127.0.0.1');
    expect(config.port).toBe(8080);
    expect(config.apiKeys.size).toBe(0);
    expect(config.secrets).toEqual({});
  });

  it('parses API keys as tenant:key and feed secrets per source', () => {
    const config = loadEmbeddedConfig({
      CTXFLOW_API_KEYS: 'acme:k1, globex:k2',
      CTXFLOW_FEED_SECRET_GITHUB: 'gh',
      CTXFLOW_HOST: '0.0.0.0',
    });
    expect([...config.apiKeys]).toEqual([
      ['k1', 'acme'],
      ['k2', 'globex'],
    ]);
    expect(config.secrets).toEqual({ github: 'gh' });
    expect(config.host).toBe('0.0.0.0');
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
    expect(loadRunnerConfig({}).heldBytes).toBe(64 * 1024 * 1024);
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
});
