import { randomUUID } from 'node:crypto';
import type { Cursor } from '@ctxflow/contracts';
import { createAuthenticator, DEFAULT_TENANT } from '@ctxflow/service-kit';
import {
  buildRunnerApp,
  type Clock,
  createEngine,
  type EngineDeps,
  MemorySessionStore,
  type RunnerTelemetry,
  type SessionStore,
  type StepContextRequest,
  type StepContextSource,
} from '@ctxflow/session-runner';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { onTestFinished } from 'vitest';
import { RedisSessionStore } from '../../services/session-runner/src/adapters/redis-session-store.ts';
import { requireRedis } from './services.ts';

/** A clock the test moves by hand. */
export class ManualClock implements Clock {
  #now: number;
  constructor(start = Date.parse('2026-01-01T00:00:00Z')) {
    this.#now = start;
  }
  now(): number {
    return this.#now;
  }
  advance(ms: number): void {
    this.#now += ms;
  }
}

export type HookScript = (request: StepContextRequest) => unknown | Promise<unknown>;

/** A stepContext hook whose answers the test scripts; records every call. */
export class ScriptedHook implements StepContextSource {
  calls: { sessionId: string; cursor: Cursor | undefined }[] = [];
  script: HookScript = () => undefined;
  async fetch(request: StepContextRequest): Promise<unknown> {
    this.calls.push({ sessionId: request.sessionId, cursor: request.cursor });
    return this.script(request);
  }
}

/** Telemetry that records what the context pass reported. */
export class RecordingTelemetry implements RunnerTelemetry {
  skipped: { sessionId: string; stepId: string; reason: string; message: string }[] = [];
  steps: Parameters<RunnerTelemetry['stepCommitted']>[0][] = [];
  contextSkipped(event: (typeof this.skipped)[number]) {
    this.skipped.push(event);
  }
  stepCommitted(event: Parameters<RunnerTelemetry['stepCommitted']>[0]) {
    this.steps.push(event);
  }
}

export interface Harness {
  app: FastifyInstance;
  clock: ManualClock;
  hook: ScriptedHook;
  telemetry: RecordingTelemetry;
  store: SessionStore;
  /** JSON request helper: returns status and parsed body. */
  call(
    method: string,
    url: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: any }>;
}

export async function createHarness(
  options: { apiKeys?: Map<string, string>; store?: SessionStore; engine?: Partial<EngineDeps> } = {},
): Promise<Harness> {
  const clock = new ManualClock();
  const hook = new ScriptedHook();
  const telemetry = new RecordingTelemetry();
  const store = options.store ?? (process.env.CTXFLOW_TEST_STORE === 'redis' ? redisStore() : new MemorySessionStore());
  const engine = createEngine({ store, clock, telemetry, feed: hook, ...options.engine });
  const app = buildRunnerApp({ engine, authenticate: createAuthenticator(options.apiKeys ?? new Map()) });
  await app.ready();
  const defaultHeaders: Record<string, string> = {};
  if (options.apiKeys?.size) defaultHeaders.authorization = `Bearer ${[...options.apiKeys.keys()][0]}`;
  return {
    app,
    clock,
    hook,
    telemetry,
    store,
    async call(method, url, body, headers) {
      const response = await app.inject({
        method: method as 'GET',
        url,
        headers: { ...defaultHeaders, ...headers },
        ...(body === undefined ? {} : { payload: body as object }),
      });
      const text = response.body;
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {}
      return { status: response.statusCode, body: parsed };
    },
  };
}

/**
 * A Redis store under a unique prefix, removed when the test ends: the
 * `conformance-on-redis` project runs the whole conformance suite on it.
 */
function redisStore(): SessionStore {
  const client = new Redis(requireRedis(), { lazyConnect: false, maxRetriesPerRequest: 2 });
  const prefix = `conf-${randomUUID().slice(0, 8)}`;
  onTestFinished(async () => {
    const keys = await client.keys(`${prefix}:*`);
    if (keys.length > 0) await client.del(...keys);
    client.disconnect();
  });
  return new RedisSessionStore(client, { prefix });
}

export { DEFAULT_TENANT };
