import { byCommit, type DeliveryIndex, type DeliveryReceipt } from '../ports/delivery-index.ts';
import { DEFAULT_RETAIN_MS } from '../ports/delivery-ledger.ts';

interface Delivery {
  /** sessionId -> the first receipt recorded for it. */
  readonly sessions: Map<string, DeliveryReceipt>;
  /** Epoch milliseconds after which the delivery's receipts are dropped. */
  expiresAt: number;
}

export interface MemoryDeliveryIndexOptions {
  /** How long a delivery's receipts are kept after its last new receipt (ms); default DEFAULT_RETAIN_MS (72 h). */
  retainMs?: number;
  clock?: () => number;
}

/**
 * The delivery index in process (the embedded default), with the Redis adapter's rules:
 * first receipt per session wins, a delivery's receipts kept `retainMs` after its last
 * new one. Deliveries are held in the order of their last write, which, with one
 * retention, is the order they end in: each write first drops the ended ones at the front.
 */
export class MemoryDeliveryIndex implements DeliveryIndex {
  readonly #deliveries = new Map<string, Delivery>();
  readonly #retainMs: number;
  readonly #clock: () => number;

  constructor(options: MemoryDeliveryIndexOptions = {}) {
    this.#retainMs = options.retainMs ?? DEFAULT_RETAIN_MS;
    this.#clock = options.clock ?? Date.now;
  }

  async record(receipts: readonly DeliveryReceipt[]): Promise<DeliveryReceipt[]> {
    const now = this.#clock();
    this.#sweep(now);
    return receipts.map((receipt) => {
      const key = deliveryKey(receipt.tenant, receipt.source, receipt.eventId);
      const delivery = this.#live(key, now) ?? { sessions: new Map<string, DeliveryReceipt>(), expiresAt: 0 };
      const kept = delivery.sessions.get(receipt.sessionId);
      if (kept) return structuredClone(kept);
      delivery.sessions.set(receipt.sessionId, structuredClone(receipt));
      delivery.expiresAt = now + this.#retainMs;
      // Re-inserted last: the map stays in the order deliveries end.
      this.#deliveries.delete(key);
      this.#deliveries.set(key, delivery);
      return structuredClone(receipt);
    });
  }

  async receipts(tenant: string, source: string, eventId: string): Promise<DeliveryReceipt[]> {
    const delivery = this.#live(deliveryKey(tenant, source, eventId), this.#clock());
    if (!delivery) return [];
    return [...delivery.sessions.values()].map((r) => structuredClone(r)).sort(byCommit);
  }

  /** Deliveries held, ended ones not dropped yet included. */
  get size(): number {
    return this.#deliveries.size;
  }

  async close(): Promise<void> {
    this.#deliveries.clear();
  }

  #live(key: string, now: number): Delivery | undefined {
    const delivery = this.#deliveries.get(key);
    return delivery && delivery.expiresAt > now ? delivery : undefined;
  }

  #sweep(now: number): void {
    for (const [key, delivery] of this.#deliveries) {
      if (delivery.expiresAt > now) return;
      this.#deliveries.delete(key);
    }
  }
}

function deliveryKey(tenant: string, source: string, eventId: string): string {
  return JSON.stringify([tenant, source, eventId]);
}
