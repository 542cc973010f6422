/**
 * The delivery index port: where each ticket update went. One receipt per
 * (tenant, source, eventId, sessionId): the hook row of the step that first
 * carried the update into that session, and so into that step's model request.
 * Read by `GET /deliveries/:source/:eventId`, written after the commit from the
 * session's row outbox (so a runner killed after its commit loses none).
 * Adapters: adapters/memory-delivery-index.ts (embedded default),
 * adapters/redis-delivery-index.ts; both pass test/contract/delivery-index.contract.ts.
 */

/** One session a ticket update reached: the hook row that carried it and its step. */
export interface DeliveryReceipt {
  tenant: string;
  /** The feed source (`zendesk`, `generic`, ...). */
  source: string;
  /** The delivery's event id within its source. */
  eventId: string;
  sessionId: string;
  /** The step whose commit wrote the row; its model request is the first to carry the update. */
  stepId: string;
  rowId: string;
  /** The step's request id, when the runtime sent one. */
  requestId?: string;
  /** When the step committed, ISO 8601. */
  at: string;
}

export interface DeliveryIndex {
  /**
   * Records receipts; a receipt already recorded for its (tenant, source, eventId, sessionId)
   * is kept as first written. Answers, for each receipt given, the one the index holds for
   * its (tenant, source, eventId, sessionId), in the same order.
   */
  record(receipts: readonly DeliveryReceipt[]): Promise<DeliveryReceipt[]>;
  /** Every receipt of one delivery within the tenant, in commit order; none is an empty list. */
  receipts(tenant: string, source: string, eventId: string): Promise<DeliveryReceipt[]>;
  close(): Promise<void>;
}

/** Commit order of receipts: by commit time, then session id (one order on every adapter). */
export function byCommit(a: DeliveryReceipt, b: DeliveryReceipt): number {
  if (a.at !== b.at) return a.at < b.at ? -1 : 1;
  return a.sessionId < b.sessionId ? -1 : a.sessionId > b.sessionId ? 1 : 0;
}
