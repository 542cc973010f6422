/**
 * CTXFLOW_OFFSET_RESET: what step-context does with a partition whose stored
 * offset does not fit its log (domain/offset-check.ts).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '@ctxflow/service-kit';
import { loadStepContextConfig } from '@ctxflow/step-context';
import { describe, expect, it } from 'vitest';

function problems(env: Record<string, string>): string[] {
  try {
    loadStepContextConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe('step-context: CTXFLOW_OFFSET_RESET', () => {
  it('earliest by default (unset or empty); earliest, latest and fail accepted', () => {
    expect(loadStepContextConfig({}).offsetReset).toBe('earliest');
    expect(loadStepContextConfig({ CTXFLOW_OFFSET_RESET: '' }).offsetReset).toBe('earliest');
    for (const policy of ['earliest', 'latest', 'fail'] as const) {
      expect(loadStepContextConfig({ CTXFLOW_OFFSET_RESET: policy }).offsetReset).toBe(policy);
    }
  });

  it('anything else is a problem naming the variable, reported with the others', () => {
    for (const bad of ['none', 'EARLIEST', 'smallest', '0']) {
      expect(problems({ CTXFLOW_OFFSET_RESET: bad }), bad).toEqual([expect.stringMatching(/^CTXFLOW_OFFSET_RESET: /)]);
    }
    expect(problems({ CTXFLOW_OFFSET_RESET: 'none', CTXFLOW_SHUTDOWN_GRACE_MS: '-1' }).sort()).toEqual([
      'CTXFLOW_OFFSET_RESET: Invalid option: expected one of "earliest"|"latest"|"fail"',
      expect.stringMatching(/^CTXFLOW_SHUTDOWN_GRACE_MS: /),
    ]);
  });

  it('the process stops at start with exit 2, naming it', () => {
    const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));
    const started = spawnSync(process.execPath, [main], {
      env: { PATH: process.env.PATH ?? '', CTXFLOW_OFFSET_RESET: 'none' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(started.status, started.stderr).toBe(2);
    expect(started.stderr).toMatch(/^step-context: invalid configuration:/);
    expect(started.stderr).toContain(
      '- CTXFLOW_OFFSET_RESET: Invalid option: expected one of "earliest"|"latest"|"fail"',
    );
  });
});
