import { byteLength } from '@ctxflow/contracts';
import type { FeedFollow } from '@ctxflow/subscriptions';
import type { FeedEntry, FeedPosition } from '../ports/feed-streams.ts';

/**
 * How both adapters answer `readSince` from the streams they read: each source's
 * streams merged into one prefix of what is new in it, then the sources
 * interleaved in write order within the read's limits.
 */

/** An entry as an adapter read it, with its write order across sources (arrival order; ties: either). */
export interface StoredEntry {
  entry: FeedEntry;
  order: number;
}

/**
 * One source's entries from the reads of its streams (each in seq order):
 * merged by seq, each seq once, and cut after the smallest last seq of a read
 * that may have stopped early (`full`: it returned as many entries as it
 * asked), so the result is a prefix of everything new in the source.
 */
export function mergeStreams(reads: readonly { entries: readonly StoredEntry[]; full: boolean }[]): StoredEntry[] {
  let cut = Number.POSITIVE_INFINITY;
  for (const read of reads) {
    const last = read.entries[read.entries.length - 1];
    if (read.full && last) cut = Math.min(cut, last.entry.seq);
  }
  const bySeq = new Map<number, StoredEntry>();
  for (const read of reads) {
    for (const e of read.entries) if (e.entry.seq <= cut && !bySeq.has(e.entry.seq)) bySeq.set(e.entry.seq, e);
  }
  return [...bySeq.values()].sort((a, b) => a.entry.seq - b.entry.seq);
}

/**
 * Sources' entries (each as mergeStreams made them) in one list within the
 * limits of `readSince`: by seq within a source, sources interleaved by write
 * order (ties: the order of `sources`).
 */
export function mergeSources(
  sources: readonly (readonly StoredEntry[])[],
  limits: { maxEntries: number; maxBytes: number },
): FeedEntry[] {
  const heads = sources.map(() => 0);
  const out: FeedEntry[] = [];
  let bytes = 0;
  while (out.length < limits.maxEntries && bytes <= limits.maxBytes) {
    let best = -1;
    for (let i = 0; i < sources.length; i++) {
      const head = sources[i]![heads[i]!];
      if (!head) continue;
      if (best < 0 || head.order < sources[best]![heads[best]!]!.order) best = i;
    }
    if (best < 0) break;
    const { entry } = sources[best]![heads[best]!]!;
    heads[best] = heads[best]! + 1;
    out.push(entry);
    bytes += byteLength(entry.update);
  }
  return out;
}

/** Where a follow reads from: after its start and after the reader's position in its source. */
export function readFrom(follow: FeedFollow, after: FeedPosition): number {
  return Math.max(follow.start, after[follow.subscription.source] ?? 0);
}
