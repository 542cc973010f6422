import type { DeliveryIndex, DeliveryReceipt } from '@ctxflow/feeds';
import type { ReceiptSink } from './ports/receipt-sink.ts';
import { carriesTicketUpdates, type OutboxEntry } from './ports/row-outbox.ts';

/**
 * The receipts of a batch of outbox entries: one per ticket update a hook row carries, per
 * session (the first row of the batch that carries it: commit order), with the step and
 * its request id. Entries of rows that carry none give none.
 */
export function receiptsOf(entries: readonly OutboxEntry[]): DeliveryReceipt[] {
  const seen = new Set<string>();
  const receipts: DeliveryReceipt[] = [];
  for (const entry of entries) {
    const { row } = entry;
    if (!carriesTicketUpdates(row)) continue;
    for (const { source, eventId } of row.row.ticketUpdates!) {
      const key = JSON.stringify([entry.tenant, source, eventId, entry.sessionId]);
      if (seen.has(key)) continue;
      seen.add(key);
      const receipt: DeliveryReceipt = {
        tenant: entry.tenant,
        source,
        eventId,
        sessionId: entry.sessionId,
        stepId: row.stepId,
        rowId: row.row.id,
        at: row.at,
      };
      if (entry.requestId) receipt.requestId = entry.requestId;
      receipts.push(receipt);
    }
  }
  return receipts;
}

export interface DeliveryReceiptsDeps {
  index: DeliveryIndex;
  /** The receipt webhook's queue; default none. */
  sink?: ReceiptSink;
}

/**
 * The row relay's `onEntries` (context-row-relay.ts): records each batch's receipts in the
 * delivery index, then hands the receipts as the index keeps them (the first per session)
 * to the sink. Both are idempotent per receipt, and the relay acknowledges the batch only
 * after this resolves, so a runner that dies in between hands the same receipts again.
 */
export function deliveryReceipts(deps: DeliveryReceiptsDeps): (entries: readonly OutboxEntry[]) => Promise<void> {
  return async (entries) => {
    const receipts = receiptsOf(entries);
    if (receipts.length === 0) return;
    const kept = await deps.index.record(receipts);
    await deps.sink?.enqueue(kept);
  };
}
