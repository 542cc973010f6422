/**
 * Start race: `npm run stack` starts the three services at once, and on a
 * fresh broker feed-ingestor and step-context both create the ticket-updates
 * topic (the runner its two step topics). Each start here uses topics no one
 * made yet (a fresh KAFKA_TOPIC_PREFIX), starts the three processes together,
 * and each of them must answer /readyz 200; SIGTERM then stops each cleanly.
 */
import { randomUUID } from 'node:crypto';
import { TOPICS } from '@ctxflow/contracts';
import { Redis } from 'ioredis';
import kafkajs from 'kafkajs';
import { afterAll, describe, expect, it } from 'vitest';
import {
  deletePrefix,
  feedIngestor,
  runnerAndStepContext,
  SESSION_TIMEOUT_MS,
  type ServiceProcess,
  stopAll,
  waitFor,
} from '../faults/processes.ts';
import { requireKafka, requireRedis } from '../support/services.ts';

const STARTS = 3;
const topicPrefixes: string[] = [];
const redisPrefixes: string[] = [];

afterAll(async () => {
  await stopAll();
  const admin = new kafkajs.Kafka({
    clientId: 'ctxflow-test-cleanup',
    brokers: requireKafka(),
    logLevel: kafkajs.logLevel.NOTHING,
  }).admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const names = topicPrefixes.flatMap((p) => Object.values(TOPICS).map((t) => `${p}${t}`));
    const ours = names.filter((n) => existing.has(n));
    if (ours.length > 0) await admin.deleteTopics({ topics: ours });
  } finally {
    await admin.disconnect();
  }
  const redis = new Redis(requireRedis());
  for (const prefix of redisPrefixes) await deletePrefix(redis, prefix);
  redis.disconnect();
});

describe('start race: the stack starts on fresh topics every time', () => {
  it(`start race: ${STARTS} starts of the three services together on fresh topic names, each gets all three ready`, async () => {
    for (let start = 0; start < STARTS; start++) {
      const tag = `${randomUUID().slice(0, 8)}-${start}`;
      const topicPrefix = `ctxflow-test-stack-${tag}.`;
      const redisPrefix = `stack-start-${tag}`;
      topicPrefixes.push(topicPrefix);
      redisPrefixes.push(redisPrefix);
      const common = {
        KAFKA_BROKERS: requireKafka().join(','),
        REDIS_URL: requireRedis(),
        KAFKA_TOPIC_PREFIX: topicPrefix,
        CTXFLOW_REDIS_PREFIX: redisPrefix,
        KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
        CTXFLOW_SHUTDOWN_GRACE_MS: '15000',
        CTXFLOW_LOG_LEVEL: 'info',
      };
      const { runner, stepContext, runnerPort, stepContextPort } = await runnerAndStepContext({
        common,
        runnerGroup: `ctxflow-test-stack-runner-${tag}`,
        stepContextGroup: `ctxflow-test-stack-step-context-${tag}`,
      });
      const { feed, feedUrl } = await feedIngestor({ common, secret: `secret-${tag}` });
      const feedPort = Number(new URL(feedUrl).port);
      const services: [ServiceProcess, number][] = [
        [feed, feedPort],
        [stepContext, stepContextPort],
        [runner, runnerPort],
      ];

      // All three at once: whichever creates a topic second gets TOPIC_ALREADY_EXISTS.
      const started = await Promise.allSettled(services.map(([service]) => service.start(60_000)));
      expect(
        started.flatMap((s, i) => (s.status === 'rejected' ? [`${services[i]![0].name}: ${s.reason}`] : [])),
      ).toEqual([]);
      for (const [service, port] of services) {
        const checks = await waitFor(
          `${service.name} /readyz 200 (start ${start + 1})`,
          async () => {
            const response = await fetch(`http://127.0.0.1:${port}/readyz`);
            return response.status === 200 ? ((await response.json()) as { checks: Record<string, string> }) : false;
          },
          60_000,
          200,
        );
        expect(Object.values(checks.checks).every((v) => v === 'ok')).toBe(true);
        expect(Object.keys(checks.checks)).toContain('kafka');
      }

      await Promise.all(services.map(([service]) => service.stop(20_000)));
      for (const [service] of services) {
        const own = service.logs.filter((l) => l.incarnation === service.incarnation);
        expect(
          own.some((l) => l.msg === `${service.name}: stopped` && l.failed === false),
          `${service.name}: ${service.stderr.join('').slice(-1000)}`,
        ).toBe(true);
        expect(own.some((l) => /ensureTopics failed/.test(String(l.msg ?? l.err)))).toBe(false);
      }
    }
  }, 300_000);
});
