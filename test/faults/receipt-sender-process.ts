/**
 * A receipt sender as its own process, for test/faults/receipt-sender-kill.test.ts: the
 * session-runner's sender on the Redis receipt queue of RECEIPT_QUEUE_PREFIX, calling
 * CTXFLOW_RECEIPT_URL, with a short lease so a killed process's receipts come back soon.
 * Prints `ready` once started.
 */
import { Secret } from '@ctxflow/service-kit';
import { RedisReceiptQueue, startReceiptSender } from '@ctxflow/session-runner';
import { Redis } from 'ioredis';

const redis = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: 3 });
const queue = new RedisReceiptQueue(redis, { prefix: process.env.RECEIPT_QUEUE_PREFIX! });
startReceiptSender({
  queue,
  webhook: {
    url: process.env.CTXFLOW_RECEIPT_URL!,
    secret: new Secret(process.env.CTXFLOW_RECEIPT_SECRET!),
    maxAttempts: 10,
    timeoutMs: 5_000,
  },
  leaseMs: Number(process.env.RECEIPT_LEASE_MS),
  batch: 5,
  pollMs: 50,
  backoffMs: 20,
  maxBackoffMs: 100,
});
process.stdout.write('ready\n');
