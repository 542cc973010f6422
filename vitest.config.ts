import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Kafka, Redis and a Redis Cluster for integration tests: from the environment, containers,
    // or scripts/infra.ts; provisioned only when a selected file needs them (see the file).
    globalSetup: ['test/setup/services.ts'],
  },
});
