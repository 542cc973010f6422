import { createHash } from 'node:crypto';
import type { DeliveryReceipt } from '@ctxflow/feeds';
import type { ReceiptSink } from './receipt-sink.ts';

/** A receipt waiting for the webhook, as one sender holds it under its lease. */
export interface QueuedReceipt {
  /** {@link receiptId} of the receipt: the `webhook-id` of every call made for it. */
  id: string;
  receipt: DeliveryReceipt;
  /** Failed calls so far (a call cut short by a stop or a crash does not count). */
  attempts: number;
  /** The holder's lease token: retry and deadLetter act only while it is still the entry's. */
  lease: string;
}

/** A receipt on the dead-letter path: the webhook refused it, or failed on every attempt. */
export interface DeadReceipt {
  id: string;
  receipt: DeliveryReceipt;
  attempts: number;
  /** The last failure: `http <status>` or the connection error, without any secret. */
  error: string;
  /** When it was dead-lettered, ms since the epoch. */
  at: number;
}

/**
 * The durable queue of receipts for the receipt webhook (CTXFLOW_RECEIPT_URL).
 * The receipts relay enqueues (the {@link ReceiptSink}); the sender
 * (receipt-sender.ts) takes due entries under a lease, so two runner replicas
 * never call the webhook for one receipt at the same time, and completes,
 * reschedules or dead-letters each. A lease that runs out (a sender that died)
 * makes the entry due again: every receipt is sent at least once, with the
 * same id each time. Adapters: memory-receipt-queue.ts (the embedded default,
 * in process), redis-receipt-queue.ts.
 */
export interface ReceiptQueue extends ReceiptSink {
  /**
   * Adds each receipt, due now, once per id: a receipt queued, dead-lettered,
   * or completed within the queue's memory of sent ids is not added again.
   * Durable when it resolves.
   */
  enqueue(receipts: readonly DeliveryReceipt[]): Promise<void>;
  /** Up to `max` due entries, each leased for `leaseMs` (not due again before then), oldest due first. */
  take(max: number, leaseMs: number): Promise<QueuedReceipt[]>;
  /** The webhook took it: removed, its id remembered so a repeated enqueue adds nothing. */
  complete(entry: QueuedReceipt): Promise<void>;
  /** The call failed: one more attempt counted, due again in `delayMs`. False when the lease was lost. */
  retry(entry: QueuedReceipt, delayMs: number, error: string): Promise<boolean>;
  /** The call was cut short (the sender stops): due now, no attempt counted. */
  release(entry: QueuedReceipt): Promise<void>;
  /** No more attempts: moved to the dead-letter path with `error`. False when the lease was lost. */
  deadLetter(entry: QueuedReceipt, error: string): Promise<boolean>;
  /** The dead-lettered receipts, oldest first. */
  deadLetters(): Promise<DeadReceipt[]>;
  /** How many receipts are dead-lettered: a count kept by the queue, read without reading them. */
  deadLetterCount(): Promise<number>;
  /**
   * Makes dead-lettered receipts due again, attempts reset: those of `ids`, or all.
   * Resolves to those it moved (a receipt replayed twice moves once).
   */
  replay(ids?: readonly string[]): Promise<DeadReceipt[]>;
  /** `listener` is called after an enqueue of this process added entries (the sender wakes at once). */
  onEnqueue(listener: () => void): void;
}

/**
 * The id of a receipt: one per (tenant, source, eventId, sessionId), the same
 * on every runner and every attempt (`rcpt_` and 32 hex digits of a SHA-256).
 */
export function receiptId(receipt: Pick<DeliveryReceipt, 'tenant' | 'source' | 'eventId' | 'sessionId'>): string {
  const key = JSON.stringify([receipt.tenant, receipt.source, receipt.eventId, receipt.sessionId]);
  return `rcpt_${createHash('sha256').update(key).digest('hex').slice(0, 32)}`;
}
