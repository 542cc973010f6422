import { randomUUID } from 'node:crypto';
import type { TicketUpdate } from '@ctxflow/contracts';
import type { FeedPosition, FeedStreams } from '@ctxflow/step-context';
import type { SubscriptionStore } from '@ctxflow/subscriptions';
import type { Cluster, Redis } from 'ioredis';

let counter = 0;

/** A valid TicketUpdate; every call gets a fresh id unless given one. */
export function makeUpdate(overrides: Partial<TicketUpdate> = {}): TicketUpdate {
  counter++;
  const eventId = overrides.eventId ?? `evt-${counter}-${randomUUID().slice(0, 8)}`;
  const source = overrides.source ?? 'generic';
  return {
    id: `${source}:${eventId}`,
    source,
    ticket: 'T-1',
    eventId,
    kind: 'commented',
    summary: `update ${counter}`,
    occurredAt: '2026-01-01T10:00:00.000Z',
    receivedAt: '2026-01-01T10:00:01.000Z',
    ...overrides,
  };
}

export function uniquePrefix(): string {
  return `test:${randomUUID().slice(0, 12)}`;
}

/** Deletes every key under `prefix` on a Redis or every master of a cluster. */
export async function deleteKeys(redis: Redis | Cluster, prefix: string): Promise<void> {
  const nodes = 'nodes' in redis && typeof redis.nodes === 'function' ? redis.nodes('master') : [redis as Redis];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      cursor = next;
      for (const key of keys) await redis.del(key);
    } while (cursor !== '0');
  }
}

/** Every key under `prefix` with the session's hash tag `{<sessionId>}`, with its PTTL (ms; -1 none), on every master. */
export async function keysOfSession(
  redis: Redis | Cluster,
  prefix: string,
  sessionId: string,
): Promise<{ key: string; pttl: number }[]> {
  const nodes = 'nodes' in redis && typeof redis.nodes === 'function' ? redis.nodes('master') : [redis as Redis];
  const found: { key: string; pttl: number }[] = [];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*{${sessionId}}*`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) found.push({ key, pttl: await node.pttl(key) });
    } while (cursor !== '0');
  }
  return found;
}

/** Polls until `check` passes or 5 s went by. */
export async function eventually(check: () => Promise<void>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/** The entries a session's streams hold after `after` (default: from where each subscription started). */
export async function entriesOf(
  stores: { feedStreams: FeedStreams; subscriptions: SubscriptionStore },
  sessionId: string,
  after: FeedPosition = {},
) {
  const follows = await stores.subscriptions.follows(sessionId);
  return stores.feedStreams.readSince(follows, after, { maxEntries: 10_000, maxBytes: 1e9 });
}
