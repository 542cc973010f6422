import { keyDigest, subscriptionKeys } from '@ctxflow/subscriptions';

/**
 * Every Redis key step-context writes, built here and nowhere else: the feed
 * streams and the consumed offsets, on the layout of @ctxflow/subscriptions
 * (its `subscriptionKeys`: the session's subscriptions, each source's
 * sequence and followers, and the hash tag they share with the streams).
 * `prefix` separates deployments and tests sharing one Redis (default `ctxflow`).
 *
 * Every script touches one slot on Redis Cluster: a tenant's source
 * (`{feed:<source>:<tenant digest>}`) holds its sequence, every stream of it
 * (ticket, scope, whole source) with that stream's followers, its dedupe ids,
 * staleness marks and (Redis Cluster) consumed offsets. The consumed offsets
 * of a single Redis have no tag.
 */
export function stepContextKeys(prefix: string) {
  const shared = subscriptionKeys(prefix);
  return {
    session: shared.session,
    source(tenant: string, source: string) {
      const tag = shared.sourceTag(tenant, source);
      return {
        ...shared.source(tenant, source),
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
        stream: (subscriptionId: string) => `${tag}:stream:${keyDigest(subscriptionId)}`,
        /** The digest ending a stream's key (read-streams.lua makes the key from it and `last`'s tag). */
        streamDigest: (subscriptionId: string) => keyDigest(subscriptionId),
      };
    },
    /**
     * Hash: `<topic>:<partition>` -> last consumed offset (decimal string);
     * `<topic>:<partition>:topic-id` -> the topic id that offset belongs to;
     * `<topic>:<partition>:epoch` -> how many times the partition's offset was
     * reset (rebind-partition.lua; absent before the first).
     */
    offsets: `${shared.base}:offsets`,
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
