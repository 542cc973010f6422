import { createHash } from 'node:crypto';

/** Digests made so far (a step names every stream it reads): bounded, dropped whole when full. */
const digests = new Map<string, string>();
const MAX_DIGESTS = 50_000;

/** 16 hex digits of SHA-1: names a tenant or a stream inside a key without any character of it. */
export function keyDigest(text: string): string {
  let made = digests.get(text);
  if (made === undefined) {
    made = createHash('sha1').update(text).digest('hex').slice(0, 16);
    if (digests.size >= MAX_DIGESTS) digests.clear();
    digests.set(text, made);
  }
  return made;
}

/**
 * The Redis keys of subscriptions, and the hash tag they share with the feed
 * streams, built here and nowhere else. `prefix` separates deployments and
 * tests sharing one Redis (default `ctxflow`); every key is under
 * `<prefix>:step-context`, the namespace of the feed streams.
 *
 * Two services write them: the session-runner (its subscription routes, and a
 * session's erasure) and step-context (its subscription routes, and the
 * refresh of a session's followers when a step reads its feed).
 * step-context's feed streams (services/step-context/src/adapters/redis/keys.ts)
 * live under the same source tag, so that the script storing an update reads
 * the stream's followers in its own slot on Redis Cluster:
 * - `{<sessionId>}`: the session's own key (its subscriptions);
 * - `{feed:<source>:<tenant digest>}`: one tenant's source: its sequence, and
 *   per subscription (a stream) its followers, beside the streams themselves.
 */
export function subscriptionKeys(prefix: string) {
  const base = `${prefix}:step-context`;
  const sourceTag = (tenant: string, source: string) => `${base}:{feed:${source}:${keyDigest(tenant)}}`;
  return {
    /** `<prefix>:step-context`: every key of subscriptions and feed streams starts with it. */
    base,
    session(sessionId: string) {
      return {
        /**
         * Hash: `subscriptionId()` -> JSON `[tenant, start]` (the source position it
         * started at), and field `~refreshed` -> epoch ms its followers' expiry was last refreshed.
         */
        subscriptions: `${base}:{${sessionId}}:follows`,
      };
    },
    /** The start of every key of one tenant's source, its hash tag included. */
    sourceTag,
    source(tenant: string, source: string) {
      const tag = sourceTag(tenant, source);
      return {
        /** String: the last seq handed out; never expires (positions refer to it). */
        seq: `${tag}:seq`,
        /** Sorted set of one subscription's followers: session id -> expiry (epoch ms, `+inf` without retention). */
        followers: (subscriptionId: string) => `${tag}:followers:${keyDigest(subscriptionId)}`,
      };
    },
  };
}

export type SubscriptionKeys = ReturnType<typeof subscriptionKeys>;
