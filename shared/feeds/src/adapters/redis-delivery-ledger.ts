import { CtxflowError } from '@ctxflow/contracts';
import { loadLuaScript } from '@ctxflow/service-kit';
import type { Cluster, Redis } from 'ioredis';
import type { ClaimOutcome, DeliveryLedger, LedgerState } from '../ports/delivery-ledger.ts';
import { ledgerKeys } from './redis/keys.ts';

const RELEASE_DELIVERY = loadLuaScript(new URL('./redis/release-delivery.lua', import.meta.url));

type LedgerRedis = (Redis | Cluster) & { releaseDelivery(key: string): Promise<number> };

/**
 * The ledger on Redis: one string key per delivery id, written with
 * `SET key pending NX PX lease` (claim) and `SET key done PX retain` (confirm).
 * A Redis failure surfaces as a retryable `store_unavailable` refusal.
 */
export class RedisDeliveryLedger implements DeliveryLedger {
  readonly #redis: LedgerRedis;
  readonly #keys: ReturnType<typeof ledgerKeys>;
  readonly #ownsClient: boolean;

  /**
   * `ownsClient`: close() also quits the client (default false: the caller shares it).
   * Every command touches one key, so a Redis Cluster client serves as well.
   */
  constructor(options: { redis: Redis | Cluster; prefix?: string; ownsClient?: boolean }) {
    const redis = options.redis as LedgerRedis;
    if (typeof redis.releaseDelivery !== 'function') {
      redis.defineCommand('releaseDelivery', { numberOfKeys: 1, lua: RELEASE_DELIVERY });
    }
    this.#redis = redis;
    this.#keys = ledgerKeys(options.prefix ?? 'ctxflow');
    this.#ownsClient = options.ownsClient ?? false;
  }

  async claim(id: string, leaseMs: number): Promise<ClaimOutcome> {
    const key = this.#keys.delivery(id);
    return this.#guard(async () => {
      // The key may expire between SET NX and GET: try again, a few times at most.
      for (let attempt = 0; attempt < 3; attempt++) {
        const set = await this.#redis.set(key, 'pending', 'PX', leaseMs, 'NX');
        if (set === 'OK') return 'claimed';
        const state = await this.#redis.get(key);
        if (state === 'done') return 'done';
        if (state === 'pending') return 'in_flight';
      }
      return 'in_flight';
    });
  }

  async confirm(id: string, retainMs: number): Promise<void> {
    await this.#guard(() => this.#redis.set(this.#keys.delivery(id), 'done', 'PX', retainMs));
  }

  async release(id: string): Promise<void> {
    await this.#guard(() => this.#redis.releaseDelivery(this.#keys.delivery(id)));
  }

  async state(id: string): Promise<LedgerState> {
    const state = await this.#guard(() => this.#redis.get(this.#keys.delivery(id)));
    if (state === 'done') return 'done';
    return state === 'pending' ? 'in_flight' : undefined;
  }

  async close(): Promise<void> {
    if (this.#ownsClient) await this.#redis.quit();
  }

  async #guard<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (cause) {
      throw new CtxflowError('store_unavailable', 'the delivery ledger did not answer', { cause });
    }
  }
}
