import { createHash } from 'node:crypto';

/** Digests made so far (a step names every stream it reads): bounded, dropped whole when full. */
const digests = new Map<string, string>();
const MAX_DIGESTS = 50_000;

/** 16 hex digits of SHA-1: names a tenant or a stream inside a key without any character of it. */
function digest(text: string): string {
  let made = digests.get(text);
  if (made === undefined) {
    made = createHash('sha1').update(text).digest('hex').slice(0, 16);
    if (digests.size >= MAX_DIGESTS) digests.clear();
    digests.set(text, made);
  }
  return made;
}

/**
 * Every Redis key step-context writes, built here and nowhere else.
 * `prefix` separates deployments and tests sharing one Redis (default `ctxflow`).
 *
 * Two kinds of hash tag, so that every script touches one slot on Redis Cluster:
 * - `{<sessionId>}`: the session's own key (its subscriptions);
 * - `{feed:<source>:<tenant digest>}`: one tenant's source: its sequence, every
 *   stream of it (ticket, scope, whole source) with that stream's followers, its
 *   dedupe ids, staleness marks and (Redis Cluster) consumed offsets.
 * The consumed offsets of a single Redis have no tag.
 */
export function stepContextKeys(prefix: string) {
  const base = `${prefix}:step-context`;
  return {
    session(sessionId: string) {
      const tag = `${base}:{${sessionId}}`;
      return {
        /**
         * Hash: `subscriptionId()` -> JSON `[tenant, start]` (the source position it
         * started at), and field `~refreshed` -> epoch ms its followers' expiry was last refreshed.
         * (Named apart from the set `:subs` of per-session streams, which it replaces.)
         */
        subscriptions: `${tag}:follows`,
      };
    },
    source(tenant: string, source: string) {
      const tag = `${base}:{feed:${source}:${digest(tenant)}}`;
      return {
        /** String: the last seq handed out; never expires (positions refer to it). */
        seq: `${tag}:seq`,
        /** Sorted set: update id -> seq, the last DEDUPE_WINDOW stored. */
        ids: `${tag}:ids`,
        /** Hash: ticket key -> `<version>|<occurredAt ms>` of the newest stored update (either part may be empty). */
        marks: `${tag}:marks`,
        /** Hash: a stream's digest (the end of its key) -> the seq of its last entry; a read skips streams with nothing new. */
        last: `${tag}:last`,
        /**
         * Hash: `sourceOffsetField()` of a partition -> last offset applied to this source
         * (Redis Cluster mode only).
         */
        offsets: `${tag}:offsets`,
        /**
         * Stream of one subscription, `...:stream:<digest>`: entry id `<seq>-0`, fields `id`, `key`,
         * `version`, `at`, `update`, `w` (write order), `trace` when traced.
         */
        stream: (subscriptionId: string) => `${tag}:stream:${digest(subscriptionId)}`,
        /** The digest ending a stream's key (read-streams.lua makes the key from it and `last`'s tag). */
        streamDigest: (subscriptionId: string) => digest(subscriptionId),
        /** Sorted set of one subscription's followers: session id -> expiry (epoch ms, `+inf` without retention). */
        followers: (subscriptionId: string) => `${tag}:followers:${digest(subscriptionId)}`,
      };
    },
    /**
     * Hash: `<topic>:<partition>` -> last consumed offset (decimal string);
     * `<topic>:<partition>:topic-id` -> the topic id that offset belongs to;
     * `<topic>:<partition>:epoch` -> how many times the partition's offset was
     * reset (rebind-partition.lua; absent before the first).
     */
    offsets: `${base}:offsets`,
  };
}

export type StepContextKeys = ReturnType<typeof stepContextKeys>;

/** The hash field of a consumed position; Kafka topic names never contain ':'. */
export function offsetField(topic: string, partition: number): string {
  return `${topic}:${partition}`;
}

/** The field of the topic id a partition's stored offset belongs to. */
export function offsetTopicIdField(field: string): string {
  return `${field}:topic-id`;
}

/** The field of a partition's reset epoch. */
export function offsetEpochField(field: string): string {
  return `${field}:epoch`;
}

/**
 * A partition's field in a source's own offsets hash (Redis Cluster): per reset
 * epoch, so a reset leaves what the sources recorded before behind (it expires
 * with the source's retention). Epoch absent: the plain field.
 */
export function sourceOffsetField(field: string, epoch: string | null | undefined): string {
  return epoch ? `${field}#${epoch}` : field;
}
