import { configDefaults, defineConfig } from 'vitest/config';

/** Compares memory, Redis and a Redis Cluster answer by answer itself: run once, on Redis. */
const REDIS_ONLY = 'test/conformance/engine-on-redis.test.ts';
/**
 * The fault suite kills processes and brokers and times what follows: its files run one at a
 * time, after every other file (sequence.groupOrder 1). The rest run two files at a time
 * (most wait on Kafka, Redis or child processes more than they compute).
 */
const FAULTS = 'test/faults/**/*.test.ts';

export default defineConfig({
  // Workspace packages built for publishing (clients/*) resolve to their .ts sources in the repository.
  resolve: { conditions: ['ctxflow-source'] },
  ssr: { resolve: { conditions: ['ctxflow-source'] } },
  test: {
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Tests that measure the live heap collect garbage first
    // (services/session-runner/test/adapters/session-cache.test.ts).
    execArgv: ['--expose-gc'],
    // Kafka, Redis and a Redis Cluster for integration tests: from the environment, containers,
    // or scripts/infra.ts; provisioned only when a selected file needs them (see the file).
    // Debian's chromium and openssl when a selected suite needs them and the machine lacks them
    // (test/setup/system-packages.ts).
    globalSetup: ['test/setup/system-packages.ts', 'test/setup/services.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'ctxflow',
          include: ['test/**/*.test.ts', '{services,shared,clients}/*/test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, REDIS_ONLY, FAULTS],
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        // The HTTP conformance suite, unchanged, with Redis as the store (test/support/harness.ts),
        // and the comparison of the stores that runs only here.
        extends: true,
        test: {
          name: 'conformance-on-redis',
          include: ['test/conformance/**/*.test.ts'],
          env: { CTXFLOW_TEST_STORE: 'redis' },
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: { name: 'faults', include: [FAULTS], maxWorkers: 1, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
