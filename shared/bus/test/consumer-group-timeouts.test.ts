/**
 * KAFKA_SESSION_TIMEOUT_MS and KAFKA_REBALANCE_TIMEOUT_MS: what the two
 * consumer services (session-runner, step-context) accept, the bus options
 * they become, and the bus's defaults when they are absent.
 */
import { ConfigError, consumerGroupOptions, DEFAULT_KAFKA_SESSION_TIMEOUT_MS } from '@ctxflow/service-kit';
import { loadRunnerConfig } from '@ctxflow/session-runner';
import { loadStepContextConfig } from '@ctxflow/step-context';
import { describe, expect, it } from 'vitest';
import { resolveKafkaBusOptions } from '../src/kafka-options.ts';

const LOADERS = { 'session-runner': loadRunnerConfig, 'step-context': loadStepContextConfig } as const;

/** The problems a service's configuration reports for `env`, or [] when it loads. */
function problems(load: (env: Record<string, string>) => unknown, env: Record<string, string>): string[] {
  try {
    load(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe.each(Object.entries(LOADERS))('%s: consumer group timeouts', (_service, load) => {
  it('absent or empty: undefined, the bus decides', () => {
    for (const env of [{}, { KAFKA_SESSION_TIMEOUT_MS: '', KAFKA_REBALANCE_TIMEOUT_MS: '' }]) {
      const config = load(env);
      expect(config.kafkaSessionTimeoutMs).toBeUndefined();
      expect(config.kafkaRebalanceTimeoutMs).toBeUndefined();
    }
  });

  it('KAFKA_REBALANCE_TIMEOUT_MS: whole ms from 1 s to 30 min, at least the session timeout', () => {
    expect(load({ KAFKA_SESSION_TIMEOUT_MS: '6000', KAFKA_REBALANCE_TIMEOUT_MS: '6000' }).kafkaRebalanceTimeoutMs).toBe(
      6_000,
    );
    expect(load({ KAFKA_REBALANCE_TIMEOUT_MS: '45000' }).kafkaRebalanceTimeoutMs).toBe(45_000);
    expect(load({ KAFKA_REBALANCE_TIMEOUT_MS: '1800000' }).kafkaRebalanceTimeoutMs).toBe(1_800_000);
    expect(load({ KAFKA_SESSION_TIMEOUT_MS: '1000', KAFKA_REBALANCE_TIMEOUT_MS: '1000' }).kafkaRebalanceTimeoutMs).toBe(
      1_000,
    );
    for (const bad of ['999', '1800001', '20s', '15000.5', '-1']) {
      expect(problems(load, { KAFKA_SESSION_TIMEOUT_MS: '1000', KAFKA_REBALANCE_TIMEOUT_MS: bad }), bad).toEqual([
        expect.stringMatching(/^KAFKA_REBALANCE_TIMEOUT_MS: /),
      ]);
    }
  });

  it('a rebalance timeout below the session timeout names KAFKA_REBALANCE_TIMEOUT_MS and the session it falls short of', () => {
    expect(problems(load, { KAFKA_SESSION_TIMEOUT_MS: '10000', KAFKA_REBALANCE_TIMEOUT_MS: '9999' })).toEqual([
      'KAFKA_REBALANCE_TIMEOUT_MS: 9999 is below the session timeout (10000 ms, KAFKA_SESSION_TIMEOUT_MS): a rebalance must last at least a session',
    ]);
    // Without KAFKA_SESSION_TIMEOUT_MS the session is the bus's default.
    expect(problems(load, { KAFKA_REBALANCE_TIMEOUT_MS: '20000' })).toEqual([
      `KAFKA_REBALANCE_TIMEOUT_MS: 20000 is below the session timeout (${DEFAULT_KAFKA_SESSION_TIMEOUT_MS} ms, the default): a rebalance must last at least a session`,
    ]);
  });

  it('reported together with the other bad variables', () => {
    expect(
      problems(load, {
        KAFKA_SESSION_TIMEOUT_MS: '12000',
        KAFKA_REBALANCE_TIMEOUT_MS: '8000',
        CTXFLOW_LOG_LEVEL: 'loud',
      }).map((p) => p.split(':')[0]),
    ).toEqual(['CTXFLOW_LOG_LEVEL', 'KAFKA_REBALANCE_TIMEOUT_MS']);
  });
});

describe('consumer group options on the bus', () => {
  it('consumerGroupOptions: the heartbeat a third of the session (3 s at most), the rebalance as given', () => {
    expect(consumerGroupOptions({})).toEqual({});
    expect(consumerGroupOptions({ sessionTimeoutMs: 6_000 })).toEqual({
      sessionTimeoutMs: 6_000,
      heartbeatIntervalMs: 2_000,
    });
    expect(consumerGroupOptions({ sessionTimeoutMs: 45_000, rebalanceTimeoutMs: 90_000 })).toEqual({
      sessionTimeoutMs: 45_000,
      heartbeatIntervalMs: 3_000,
      rebalanceTimeoutMs: 90_000,
    });
    expect(consumerGroupOptions({ rebalanceTimeoutMs: 20_000 })).toEqual({ rebalanceTimeoutMs: 20_000 });
  });

  it("the bus's defaults: a 30 s session, a 60 s rebalance or the session if longer", () => {
    const resolve = (options: { sessionTimeoutMs?: number; rebalanceTimeoutMs?: number }) =>
      resolveKafkaBusOptions({ brokers: ['127.0.0.1:9092'], clientId: 'test', ...options });
    expect(resolve({})).toMatchObject({
      sessionTimeoutMs: DEFAULT_KAFKA_SESSION_TIMEOUT_MS,
      rebalanceTimeoutMs: 60_000,
    });
    expect(resolve({ sessionTimeoutMs: 6_000 })).toMatchObject({ sessionTimeoutMs: 6_000, rebalanceTimeoutMs: 60_000 });
    expect(resolve({ sessionTimeoutMs: 120_000 })).toMatchObject({ rebalanceTimeoutMs: 120_000 });
    expect(resolve({ sessionTimeoutMs: 6_000, rebalanceTimeoutMs: 15_000 })).toMatchObject({
      rebalanceTimeoutMs: 15_000,
    });
    expect(() => resolve({ sessionTimeoutMs: 10_000, rebalanceTimeoutMs: 9_000 })).toThrow(
      'a rebalance timeout (9000 ms) below the session timeout (10000 ms)',
    );
  });
});
