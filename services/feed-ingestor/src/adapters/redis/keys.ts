/**
 * Every Redis key the feed-ingestor writes, built here and nowhere else.
 * `prefix` separates deployments and tests sharing one Redis (default `ctxflow`).
 */
export function ledgerKeys(prefix: string) {
  return {
    /** String: `pending` (a publish lease) or `done` (confirmed), with a TTL. */
    delivery: (deliveryId: string) => `${prefix}:feed:delivery:${deliveryId}`,
  };
}
