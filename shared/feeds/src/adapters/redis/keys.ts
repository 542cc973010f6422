/**
 * Every Redis key the feed routes and the delivery index write, built here and nowhere else. The feed-ingestor
 * and the session-runner serve the same routes on the same keys: a delivery sent to both
 * is published once.
 * `prefix` separates deployments and tests sharing one Redis (default `ctxflow`).
 */
export function ledgerKeys(prefix: string) {
  return {
    /** String: `pending` (a publish lease) or `done` (confirmed), with a TTL. */
    delivery: (deliveryId: string) => `${prefix}:feed:delivery:${deliveryId}`,
    /**
     * Hash: the receipts of one delivery (redis-delivery-index.ts), sessionId -> DeliveryReceipt
     * JSON, with a TTL; its own slot (the braces), every command on it alone.
     */
    receipts: (tenant: string, source: string, eventId: string) =>
      `${prefix}:feed:receipts:{${tenant}:${source}:${eventId}}`,
  };
}
