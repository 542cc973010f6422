/**
 * The real stack as processes for one test file: the session-runner and
 * step-context (and, with `feedIngestor`, the feed-ingestor) on the shared
 * Kafka and Redis, under a fresh Redis key prefix and fresh consumer groups
 * that start at the end of their topics, with tenants' API keys. `stop()`
 * stops every process and deletes the prefix's keys.
 */
import { type Bus, createBus } from '@ctxflow/bus';
import { TOPICS } from '@ctxflow/contracts';
import { Redis } from 'ioredis';
import kafkajs from 'kafkajs';
import {
  deletePrefix,
  feedIngestor,
  runnerAndStepContext,
  type ServiceProcess,
  startGroupsAtEnd,
  stopAll,
} from '../faults/processes.ts';
import { requireKafka, requireRedis } from './services.ts';

export interface StackOptions<K extends string> {
  /** Names this stack's prefix and consumer groups (`<name>-runner-<run>`). */
  name: string;
  /** Unique per file: appended to the prefix and the group ids. */
  run: string;
  /** Tenant -> API key (`CTXFLOW_API_KEYS`). */
  keys: Record<K, string>;
  /** More environment shared by every service (feed secrets, retention). */
  env?: Record<string, string>;
  /** Start the feed-ingestor too, with `CTXFLOW_FEED_SECRET_GENERIC` of `env`. */
  feedIngestor?: boolean;
}

export interface Stack<K extends string> {
  /** The Redis key prefix of every service (`CTXFLOW_REDIS_PREFIX`). */
  prefix: string;
  runner: ServiceProcess;
  runnerUrl: string;
  /** The feed-ingestor's generic feed route, when started. */
  feedUrl: string;
  /** A client of the shared Redis, quit by `stop()`. */
  redis: Redis;
  /** A JSON call on the runner's port as `tenant`: status and parsed body. */
  api(tenant: K, method: string, path: string, body?: object): Promise<{ status: number; body: any }>;
  stop(): Promise<void>;
}

export async function startStack<K extends string>(options: StackOptions<K>): Promise<Stack<K>> {
  const brokers = requireKafka();
  const prefix = `${options.name}:${options.run}`;
  const redis = new Redis(requireRedis());
  const groups = {
    runner: `${options.name}-runner-${options.run}`,
    stepContext: `${options.name}-step-context-${options.run}`,
  };
  await startGroupsAtEnd(brokers, [
    { groupId: groups.runner, topic: TOPICS.stepRequests },
    { groupId: groups.stepContext, topic: TOPICS.ticketUpdates },
  ]);
  const common: Record<string, string> = {
    KAFKA_BROKERS: brokers.join(','),
    REDIS_URL: requireRedis(),
    CTXFLOW_REDIS_PREFIX: prefix,
    KAFKA_SESSION_TIMEOUT_MS: '6000',
    CTXFLOW_LOG_LEVEL: 'error',
    CTXFLOW_API_KEYS: Object.entries<string>(options.keys)
      .map(([tenant, key]) => `${tenant}:${key}`)
      .join(','),
    ...options.env,
  };
  const services = await runnerAndStepContext({
    common,
    runnerGroup: groups.runner,
    stepContextGroup: groups.stepContext,
  });
  const processes = [services.runner, services.stepContext];
  let feedUrl = '';
  if (options.feedIngestor) {
    // The feed-ingestor takes the tenant pairs from its own variable.
    const started = await feedIngestor({ common, secret: common.CTXFLOW_FEED_SECRET_GENERIC ?? '' });
    processes.push(started.feed);
    feedUrl = started.feedUrl;
  }
  await Promise.all(processes.map((p) => p.start()));
  const runnerUrl = `http://127.0.0.1:${services.runnerPort}`;
  return {
    prefix,
    runner: services.runner,
    runnerUrl,
    feedUrl,
    redis,
    async api(tenant, method, path, body) {
      const response = await fetch(`${runnerUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${options.keys[tenant]}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : undefined };
    },
    async stop() {
      await stopAll();
      await deletePrefix(redis, prefix);
      await redis.quit();
    },
  };
}

/**
 * A platformatic bus under a fresh `KAFKA_TOPIC_PREFIX` (`ctxflow-test-<name>-<tag>.`)
 * on the shared broker, for a file that runs the services in-process: `topics`
 * are created with one partition; `close()` closes the bus and deletes them.
 */
export async function prefixedBus(
  name: string,
  tag: string,
  topics: string[],
): Promise<{ bus: Bus; prefix: string; close(): Promise<void> }> {
  const brokers = requireKafka();
  const prefix = `ctxflow-test-${name}-${tag}.`;
  const bus = createBus({
    client: 'platformatic',
    clientId: `ctxflow-test-${name}-${tag}`,
    brokers,
    topicPrefix: prefix,
  });
  await bus.admin.ensureTopics(topics.map((topic) => ({ name: topic, partitions: 1 })));
  return {
    bus,
    prefix,
    async close() {
      await bus.publisher.close();
      await bus.admin.close();
      const admin = new kafkajs.Kafka({ clientId: `ctxflow-test-${name}-cleanup-${tag}`, brokers }).admin();
      await admin.connect();
      try {
        const existing = new Set(await admin.listTopics());
        const owned = topics.map((topic) => `${prefix}${topic}`).filter((topic) => existing.has(topic));
        if (owned.length > 0) await admin.deleteTopics({ topics: owned });
      } finally {
        await admin.disconnect();
      }
    },
  };
}
