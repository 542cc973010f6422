import type { TicketUpdate } from '@ctxflow/contracts';

/**
 * The staleness rule of FeedStreams (ports/feed-streams.ts) as code: the memory adapter
 * calls these functions, and the Redis script mirrors them in
 * redis/includes/ticket-mark.lua (test/contract/ticket-marks.test.ts proves the two
 * agree on generated marks and updates, versions and times present or absent).
 */

/** Staleness mark of one ticket in its source: the newest stored version and time. */
export interface TicketMark {
  version?: number;
  /** Epoch ms of `occurredAt`; undefined when it does not parse. */
  occurredAtMs?: number;
}

/** Whether `update` is stale against the mark of its ticket (the rule of FeedStreams). */
export function isStale(mark: TicketMark | undefined, update: Pick<TicketUpdate, 'version' | 'occurredAt'>): boolean {
  if (!mark) return false;
  if (mark.version !== undefined && update.version !== undefined) return update.version < mark.version;
  const at = occurredAtMs(update.occurredAt);
  return at !== undefined && mark.occurredAtMs !== undefined && at < mark.occurredAtMs;
}

/** The mark after storing `update`: its version (else the mark's), the later of the two times. */
export function nextMark(
  mark: TicketMark | undefined,
  update: Pick<TicketUpdate, 'version' | 'occurredAt'>,
): TicketMark {
  const at = occurredAtMs(update.occurredAt);
  const version = update.version ?? mark?.version;
  const times = [mark?.occurredAtMs, at].filter((t): t is number => t !== undefined);
  const next: TicketMark = {};
  if (version !== undefined) next.version = version;
  if (times.length > 0) next.occurredAtMs = Math.max(...times);
  return next;
}

/** Epoch ms of an update's `occurredAt`, or undefined when it does not parse. */
export function occurredAtMs(occurredAt: string): number | undefined {
  const ms = Date.parse(occurredAt);
  return Number.isFinite(ms) ? ms : undefined;
}
