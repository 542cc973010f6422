import type { TelemetryHandles } from '@ctxflow/telemetry';
import type { Cluster, Redis } from 'ioredis';
import { MemoryReceiptQueue } from './adapters/memory-receipt-queue.ts';
import { RedisReceiptQueue } from './adapters/redis-receipt-queue.ts';
import type { ReceiptQueue } from './ports/receipt-queue.ts';
import { noReceiptSink, type ReceiptSink } from './ports/receipt-sink.ts';
import type { ReceiptWebhookConfig } from './receipt-config.ts';
import { createReceiptTelemetry, type ReceiptSenderDeps, startReceiptSender } from './receipt-sender.ts';

export interface ReceiptWebhook {
  /** Where the receipts relay hands new receipts: the queue, or {@link noReceiptSink} without a webhook. */
  sink: ReceiptSink;
  /** The queue, when a webhook is configured (dead letters are listed and replayed on it). */
  queue?: ReceiptQueue;
  /** Stops the sender (calls in flight are put back in the queue). */
  close(): Promise<void>;
}

/**
 * The receipt webhook of a process: without CTXFLOW_RECEIPT_URL nothing (the
 * sink drops receipts); with it, the queue (on Redis when the process has
 * one, so every replica shares it; else in process) and its sender.
 */
export function startReceiptWebhook(deps: {
  webhook: ReceiptWebhookConfig | undefined;
  redis?: Redis | Cluster | undefined;
  /** CTXFLOW_REDIS_PREFIX. */
  prefix?: string;
  log?: ReceiptSenderDeps['log'];
  /** The meter of the receipt webhook's instruments; default the global one. */
  telemetry?: TelemetryHandles;
}): ReceiptWebhook {
  if (deps.webhook === undefined) return { sink: noReceiptSink, close: async () => {} };
  const queue: ReceiptQueue = deps.redis
    ? new RedisReceiptQueue(deps.redis, deps.prefix === undefined ? {} : { prefix: deps.prefix })
    : new MemoryReceiptQueue();
  // The dead-letter gauge reads the queue's count (one ZCARD on Redis) on each collection.
  const telemetry = createReceiptTelemetry(deps.telemetry ?? {}, () => queue.deadLetterCount());
  const sender = startReceiptSender({
    queue,
    webhook: deps.webhook,
    telemetry,
    ...(deps.log ? { log: deps.log } : {}),
  });
  deps.log?.info?.({ receiptWebhook: new URL(deps.webhook.url).origin }, 'receipt webhook on');
  return {
    sink: queue,
    queue,
    close: async () => {
      telemetry.close?.();
      await sender.close();
    },
  };
}
