import type { DeliveryReceipt } from '@ctxflow/feeds';

/**
 * Where the receipts relay hands each new receipt after recording it in the
 * delivery index: the receipt webhook (CTXFLOW_RECEIPT_URL), which tells the
 * desk once per (tenant, source, eventId, sessionId) that the update reached a
 * model request. `enqueue` must be durable when it resolves (the relay
 * acknowledges its outbox entries after it) and idempotent per receipt, since
 * a relay cut short hands the same receipts again.
 */
export interface ReceiptSink {
  enqueue(receipts: readonly DeliveryReceipt[]): Promise<void>;
}

/** The sink when no receipt webhook is configured. */
export const noReceiptSink: ReceiptSink = { enqueue: async () => {} };
