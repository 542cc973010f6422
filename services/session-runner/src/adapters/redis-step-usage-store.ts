import { CtxflowError } from '@ctxflow/contracts';
import type { Cluster, Redis } from 'ioredis';
import type { StepUsage } from '../domain/provider-usage.ts';
import type { RecordedUsage, StepUsageStore } from '../ports/step-usage-store.ts';
import { stepUsageKey } from './redis/keys.ts';

export interface RedisStepUsageStoreOptions {
  /** Key prefix, the session store's (CTXFLOW_REDIS_PREFIX; default `ctx`). */
  prefix?: string;
  /** Retention in ms after a session's last report (CTXFLOW_SESSION_TTL_MS); 0 (default): kept. */
  ttlMs?: number;
}

/**
 * Step usage on Redis: one hash per session (keys.ts stepUsageKey), stepId -> StepUsage JSON.
 * A report is one MULTI on that key: HSETNX (first wins), the retention, and the stored value.
 */
export class RedisStepUsageStore implements StepUsageStore {
  readonly #client: Redis | Cluster;
  readonly #prefix: string;
  readonly #ttlMs: number;

  constructor(client: Redis | Cluster, options: RedisStepUsageStoreOptions = {}) {
    this.#client = client;
    this.#prefix = options.prefix ?? 'ctx';
    this.#ttlMs = options.ttlMs ?? 0;
    if (!Number.isSafeInteger(this.#ttlMs) || this.#ttlMs < 0) {
      throw new Error(`ttlMs ${this.#ttlMs} is not a non-negative integer`);
    }
  }

  async record(sessionId: string, usage: StepUsage): Promise<RecordedUsage> {
    const key = stepUsageKey(this.#prefix, sessionId);
    const multi = this.#client.multi().hsetnx(key, usage.stepId, JSON.stringify(usage));
    if (this.#ttlMs > 0) multi.pexpire(key, this.#ttlMs);
    multi.hget(key, usage.stepId);
    const replies = await this.#guard(() => multi.exec());
    if (!replies) throw new Error('the step usage MULTI was discarded');
    for (const [err] of replies) if (err) throw this.#wrap(err);
    const set = replies[0]![1] as number;
    const stored = replies.at(-1)![1] as string;
    return { recorded: set === 1, usage: JSON.parse(stored) as StepUsage };
  }

  async get(sessionId: string, stepId: string): Promise<StepUsage | undefined> {
    const json = await this.#guard(() => this.#client.hget(stepUsageKey(this.#prefix, sessionId), stepId));
    return json === null ? undefined : (JSON.parse(json) as StepUsage);
  }

  async list(sessionId: string): Promise<StepUsage[]> {
    const values = await this.#guard(() => this.#client.hvals(stepUsageKey(this.#prefix, sessionId)));
    return values.map((json) => JSON.parse(json) as StepUsage).sort((a, b) => a.ordinal - b.ordinal);
  }

  async deleteSession(sessionId: string): Promise<void> {
    await this.#guard(() => this.#client.del(stepUsageKey(this.#prefix, sessionId)));
  }

  async #guard<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (cause) {
      throw this.#wrap(cause);
    }
  }

  /** Redis errors are the store being unavailable (the commands here cannot be refused otherwise). */
  #wrap(cause: unknown): unknown {
    if (cause instanceof CtxflowError) return cause;
    return new CtxflowError('store_unavailable', 'the step usage store did not answer', { cause });
  }
}
