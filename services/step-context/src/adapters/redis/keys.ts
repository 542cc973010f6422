import { DEFAULT_TENANT } from '@ctxflow/contracts';

/**
 * Every Redis key step-context writes, built here and nowhere else.
 * `prefix` separates deployments and tests sharing one Redis (default `ctxflow`).
 *
 * Every key of one session sits under the hash tag `{<sessionId>}`, so one
 * script can touch all of them on Redis Cluster. Keys that span sessions (the
 * consumed offsets, the subscription index) have no session tag; each key of
 * the subscription index is read on its own, never with another in one script.
 */
export function stepContextKeys(prefix: string) {
  const base = `${prefix}:step-context`;
  return {
    session(sessionId: string) {
      const tag = `${base}:{${sessionId}}`;
      return {
        /** Stream: entry id `<cursor>-0`, fields `id`, `key`, `version`, `at`, `update`, `trace` when traced (append-entry.lua). */
        stream: `${tag}:stream`,
        /** String: the last cursor handed out. */
        seq: `${tag}:seq`,
        /** Set: update ids applied to the session. */
        ids: `${tag}:ids`,
        /** Hash: ticket key -> `<version>|<occurredAt ms>` of the newest appended update (either part may be empty). */
        marks: `${tag}:marks`,
        /** Hash: `<topic>:<partition>` -> last offset applied to this session (Redis Cluster mode only). */
        offsets: `${tag}:offsets`,
        /** Set: the session's subscriptions, each `subscriptionId()` (a JSON array). */
        subscriptions: `${tag}:subs`,
      };
    },
    /** Hash: `<topic>:<partition>` -> last consumed offset (decimal string). */
    offsets: `${base}:offsets`,
    /**
     * Set of the session ids of `tenant` following one subscription
     * (`subscriptionId()`: exact or wildcard): `<base>:tenant:<tenant>:subscribers:<id>`.
     * The single-tenant default keeps the key it had before feeds had tenants,
     * `<base>:subscribers:<id>`, so its subscriptions carry over. A tenant never
     * contains ":" (CTXFLOW_API_KEYS splits at the first one): no two tenants' keys meet.
     */
    subscribers: (tenant: string, subscriptionId: string) =>
      tenant === DEFAULT_TENANT
        ? `${base}:subscribers:${subscriptionId}`
        : `${base}:tenant:${tenant}:subscribers:${subscriptionId}`,
  };
}

export type StepContextKeys = ReturnType<typeof stepContextKeys>;

/** The hash field of a consumed position; Kafka topic names never contain ':'. */
export function offsetField(topic: string, partition: number): string {
  return `${topic}:${partition}`;
}
