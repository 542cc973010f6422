import type { DeliveryReceipt } from '@ctxflow/feeds';
import {
  ATTR_RECEIPT_OUTCOME,
  lazy,
  METRIC_RECEIPT_DEAD_LETTERS,
  METRIC_RECEIPT_WEBHOOK_CALLS,
  meterOf,
  type TelemetryHandles,
} from '@ctxflow/telemetry';
import { Webhook } from 'standardwebhooks';
import type { QueuedReceipt, ReceiptQueue } from './ports/receipt-queue.ts';
import type { ReceiptWebhookConfig } from './receipt-config.ts';
import { Wakeup } from './wakeup.ts';

/** The `type` of every receipt webhook call: a ticket update reached a session's model request. */
export const RECEIPT_EVENT_TYPE = 'delivery.seen';

/** What one call of the receipt webhook came to. */
export type ReceiptOutcome = 'sent' | 'retried' | 'dead_lettered';

export interface ReceiptTelemetry {
  called(outcome: ReceiptOutcome): void;
  /** Stops reading the dead-letter count (the queue is closed). */
  close?(): void;
}

/**
 * {@link ReceiptTelemetry} on OpenTelemetry (the meter of `handles`, else the global one): the
 * counter METRIC_RECEIPT_WEBHOOK_CALLS by outcome and, with `deadLetters` (the queue's
 * deadLetterCount), the observable gauge METRIC_RECEIPT_DEAD_LETTERS, read on each collection.
 * A count that fails (the store does not answer) observes nothing in that collection.
 */
export function createReceiptTelemetry(
  handles: TelemetryHandles = {},
  deadLetters?: () => Promise<number>,
): ReceiptTelemetry {
  const meter = meterOf(handles);
  const calls = lazy(() =>
    meter().createCounter(METRIC_RECEIPT_WEBHOOK_CALLS, {
      description: 'Calls of the receipt webhook, by outcome',
      unit: '{call}',
    }),
  );
  if (deadLetters === undefined) return { called: (outcome) => calls().add(1, { [ATTR_RECEIPT_OUTCOME]: outcome }) };
  const gauge = meter().createObservableGauge(METRIC_RECEIPT_DEAD_LETTERS, {
    description: 'Receipts on the receipt webhook dead-letter path, waiting for a replay',
    unit: '{receipt}',
  });
  const observe = async (result: { observe(value: number): void }) => {
    const count = await deadLetters().catch(() => undefined);
    if (count !== undefined) result.observe(count);
  };
  gauge.addCallback(observe);
  return {
    called: (outcome) => calls().add(1, { [ATTR_RECEIPT_OUTCOME]: outcome }),
    close: () => gauge.removeCallback(observe),
  };
}

export interface ReceiptSenderDeps {
  queue: ReceiptQueue;
  webhook: ReceiptWebhookConfig;
  telemetry?: ReceiptTelemetry;
  log?: { warn(obj: object, msg: string): void; info?(obj: object, msg: string): void };
  /** Receipts called at once at most; default 20. */
  batch?: number;
  /** How often the sender looks for receipts nobody woke it for (retries due, another process's), ms; default 1000. */
  pollMs?: number;
  /** The first retry's delay, doubled on each later one (with jitter), ms; default 1000. */
  backoffMs?: number;
  /** The longest delay between two calls of a receipt, ms; default 600000. A longer Retry-After is cut to it. */
  maxBackoffMs?: number;
  /** How long a taken receipt stays with this sender, ms; default the call timeout plus 20 s. */
  leaseMs?: number;
}

export interface ReceiptSender {
  /** Stops: calls in flight are cut short and their receipts put back, due at once, attempts unchanged. */
  close(): Promise<void>;
}

/** The body of a receipt's calls: the same bytes on every attempt. */
export function receiptBody(receipt: DeliveryReceipt): string {
  const data: DeliveryReceipt = {
    tenant: receipt.tenant,
    source: receipt.source,
    eventId: receipt.eventId,
    sessionId: receipt.sessionId,
    stepId: receipt.stepId,
    rowId: receipt.rowId,
    ...(receipt.requestId === undefined ? {} : { requestId: receipt.requestId }),
    at: receipt.at,
  };
  return JSON.stringify({ type: RECEIPT_EVENT_TYPE, timestamp: receipt.at, data });
}

/** Statuses worth calling again: the receiver may take the same call later. */
function retryable(status: number): boolean {
  return status === 408 || status === 425 || status === 429 || status >= 500;
}

/** A Retry-After header (seconds, or an HTTP date) as ms from now; undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

type CallResult =
  | { kind: 'sent' }
  | { kind: 'refused'; error: string }
  | { kind: 'failed'; error: string; retryAfterMs?: number }
  | { kind: 'cut' };

/**
 * Calls the receipt webhook for every queued receipt: a POST of
 * {@link receiptBody}, signed with Standard Webhooks (`webhook-id` the receipt
 * id, the same on every attempt and every runner, so the receiver dedupes).
 * A 2xx completes the receipt; 408, 425, 429, 5xx, a timeout or a connection
 * error retries it after an exponential backoff (at least the Retry-After),
 * until CTXFLOW_RECEIPT_MAX_ATTEMPTS calls failed; any other answer (3xx,
 * 4xx) means the receiver refuses it: dead-lettered at once. Receipts are
 * taken under a lease, so two runners never call for one at the same time; a
 * runner that dies mid-call leaves its receipts to the next one once the
 * lease runs out: at least once, each call with the same id.
 */
export function startReceiptSender(deps: ReceiptSenderDeps): ReceiptSender {
  const { queue, webhook } = deps;
  const batch = deps.batch ?? 20;
  const pollMs = deps.pollMs ?? 1_000;
  const backoffMs = deps.backoffMs ?? 1_000;
  const maxBackoffMs = deps.maxBackoffMs ?? 600_000;
  const leaseMs = deps.leaseMs ?? webhook.timeoutMs + 20_000;
  const signer = new Webhook(webhook.secret.reveal());
  const stopping = new AbortController();
  const wakeup = new Wakeup();
  queue.onEnqueue(() => wakeup.ring());

  async function call(entry: QueuedReceipt): Promise<CallResult> {
    const body = receiptBody(entry.receipt);
    // One instant for the signature and its header: a second boundary between two clock reads would break it.
    const sentAt = new Date();
    const signature = signer.sign(entry.id, sentAt, body);
    try {
      const answer = await fetch(webhook.url, {
        method: 'POST',
        redirect: 'manual',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'ctxflow-receipts',
          'webhook-id': entry.id,
          'webhook-timestamp': String(Math.floor(sentAt.getTime() / 1000)),
          'webhook-signature': signature,
        },
        body,
        signal: AbortSignal.any([stopping.signal, AbortSignal.timeout(webhook.timeoutMs)]),
      });
      await answer.body?.cancel().catch(() => undefined);
      if (answer.status >= 200 && answer.status < 300) return { kind: 'sent' };
      const error = `http ${answer.status}`;
      if (!retryable(answer.status)) return { kind: 'refused', error };
      const after = retryAfterMs(answer.headers.get('retry-after'));
      return after === undefined ? { kind: 'failed', error } : { kind: 'failed', error, retryAfterMs: after };
    } catch (err) {
      if (stopping.signal.aborted) return { kind: 'cut' };
      const name = (err as Error).name;
      if (name === 'TimeoutError') return { kind: 'failed', error: `timeout after ${webhook.timeoutMs} ms` };
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      return { kind: 'failed', error: `connection: ${cause?.code ?? cause?.message ?? (err as Error).message}` };
    }
  }

  function delayOf(attempts: number, retryAfter: number | undefined): number {
    const exponential = Math.min(maxBackoffMs, backoffMs * 2 ** Math.min(attempts, 30));
    const jittered = exponential * (0.5 + Math.random() * 0.5);
    return Math.min(maxBackoffMs, Math.max(jittered, retryAfter ?? 0));
  }

  async function send(entry: QueuedReceipt): Promise<void> {
    const result = await call(entry);
    const about = {
      receiptId: entry.id,
      tenant: entry.receipt.tenant,
      source: entry.receipt.source,
      eventId: entry.receipt.eventId,
      sessionId: entry.receipt.sessionId,
    };
    if (result.kind === 'cut') return queue.release(entry);
    if (result.kind === 'sent') {
      await queue.complete(entry);
      deps.telemetry?.called('sent');
      return;
    }
    const attempts = entry.attempts + 1;
    if (result.kind === 'refused' || attempts >= webhook.maxAttempts) {
      if (await queue.deadLetter(entry, result.error)) {
        deps.telemetry?.called('dead_lettered');
        deps.log?.warn({ ...about, attempts, error: result.error }, 'receipt webhook: receipt dead-lettered');
      }
      return;
    }
    const delayMs = delayOf(entry.attempts, result.kind === 'failed' ? result.retryAfterMs : undefined);
    if (await queue.retry(entry, delayMs, result.error)) {
      deps.telemetry?.called('retried');
      deps.log?.info?.({ ...about, attempts, error: result.error, delayMs }, 'receipt webhook: call failed, retrying');
    }
  }

  const loop = (async () => {
    while (!stopping.signal.aborted) {
      wakeup.reset();
      try {
        const entries = await queue.take(batch, leaseMs);
        if (entries.length === 0) {
          await wakeup.pause(pollMs);
          continue;
        }
        // A receipt whose settling failed stays leased: it is called again when the lease runs out.
        for (const settled of await Promise.allSettled(entries.map(send))) {
          if (settled.status === 'rejected') {
            deps.log?.warn({ error: (settled.reason as Error).message }, 'receipt webhook: queue failed, retrying');
          }
        }
      } catch (err) {
        deps.log?.warn({ error: (err as Error).message }, 'receipt webhook: queue failed, retrying');
        wakeup.reset();
        await wakeup.pause(pollMs);
      }
    }
  })();

  return {
    async close() {
      stopping.abort();
      wakeup.close();
      await loop;
    },
  };
}
