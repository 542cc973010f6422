import { CtxflowError } from '@ctxflow/contracts';
import type { Cluster, Redis } from 'ioredis';
import { byCommit, type DeliveryIndex, type DeliveryReceipt } from '../ports/delivery-index.ts';
import { DEFAULT_RETAIN_MS } from '../ports/delivery-ledger.ts';
import { ledgerKeys } from './redis/keys.ts';

export interface RedisDeliveryIndexOptions {
  redis: Redis | Cluster;
  /** Key prefix (CTXFLOW_REDIS_PREFIX), the delivery ledger's; default `ctxflow`. */
  prefix?: string;
  /** How long a delivery's receipts are kept after its last write (ms); default DEFAULT_RETAIN_MS (72 h). */
  retainMs?: number;
}

/**
 * The delivery index on Redis: one hash per delivery (keys.ts `receipts`, the tenant, source
 * and event id in its hash tag), one field per session holding its receipt JSON. A write is
 * one MULTI on that hash: HSETNX per session (the first receipt stays), PEXPIRE (the
 * retention, from the last write), HMGET of the receipts as kept. Every command touches one
 * key, so a Redis Cluster client serves as well. A Redis failure is a retryable
 * `store_unavailable`.
 */
export class RedisDeliveryIndex implements DeliveryIndex {
  readonly #redis: Redis | Cluster;
  readonly #keys: ReturnType<typeof ledgerKeys>;
  readonly #retainMs: number;

  constructor(options: RedisDeliveryIndexOptions) {
    this.#redis = options.redis;
    this.#keys = ledgerKeys(options.prefix ?? 'ctxflow');
    this.#retainMs = options.retainMs ?? DEFAULT_RETAIN_MS;
    if (!Number.isSafeInteger(this.#retainMs) || this.#retainMs < 1) {
      throw new Error(`retainMs ${this.#retainMs} is not a positive integer`);
    }
  }

  async record(receipts: readonly DeliveryReceipt[]): Promise<DeliveryReceipt[]> {
    const byKey = new Map<string, DeliveryReceipt[]>();
    for (const receipt of receipts) {
      const key = this.#keys.receipts(receipt.tenant, receipt.source, receipt.eventId);
      const list = byKey.get(key) ?? [];
      list.push(receipt);
      byKey.set(key, list);
    }
    const kept = new Map<string, Map<string, DeliveryReceipt>>();
    await Promise.all(
      [...byKey].map(async ([key, list]) => {
        const multi = this.#redis.multi();
        for (const r of list) multi.hsetnx(key, r.sessionId, JSON.stringify(r));
        multi.pexpire(key, this.#retainMs);
        multi.hmget(key, ...list.map((r) => r.sessionId));
        const replies = await this.#guard(() => multi.exec());
        if (!replies) throw new CtxflowError('store_unavailable', 'the delivery index write was discarded');
        for (const [err] of replies) if (err) throw this.#wrap(err);
        const values = replies.at(-1)![1] as (string | null)[];
        const bySession = new Map<string, DeliveryReceipt>();
        for (const [i, r] of list.entries()) {
          const stored = values[i];
          bySession.set(r.sessionId, stored ? (JSON.parse(stored) as DeliveryReceipt) : r);
        }
        kept.set(key, bySession);
      }),
    );
    return receipts.map(
      (r) => kept.get(this.#keys.receipts(r.tenant, r.source, r.eventId))!.get(r.sessionId) ?? structuredClone(r),
    );
  }

  async receipts(tenant: string, source: string, eventId: string): Promise<DeliveryReceipt[]> {
    const values = await this.#guard(() => this.#redis.hvals(this.#keys.receipts(tenant, source, eventId)));
    return values.map((json) => JSON.parse(json) as DeliveryReceipt).sort(byCommit);
  }

  async close(): Promise<void> {}

  async #guard<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (cause) {
      throw this.#wrap(cause);
    }
  }

  #wrap(cause: unknown): unknown {
    if (cause instanceof CtxflowError) return cause;
    return new CtxflowError('store_unavailable', 'the delivery index did not answer', { cause });
  }
}
