import type { ServerResponse } from 'node:http';
import type { SessionEvent } from '../ports/session-events.ts';

/** Bytes of the replay a stream opens with (its summary event included); older chunks are summarized. */
export const STREAM_REPLAY_BYTES = 256 * 1024;
/**
 * Bytes written to a follower and not yet taken by its client (the response's
 * and the socket's buffers) above which the next chunk drops the follower:
 * its connection is destroyed instead of buffering without bound. Four
 * full-size messages (1 MiB each) of slack for a client that reads; a
 * follower holds at most this plus one event.
 */
export const STREAM_BUFFER_BYTES = 4 * 1024 * 1024;

export interface StreamLimits {
  replayBytes: number;
  bufferBytes: number;
}

export const DEFAULT_STREAM_LIMITS: StreamLimits = {
  replayBytes: STREAM_REPLAY_BYTES,
  bufferBytes: STREAM_BUFFER_BYTES,
};

/**
 * One server-sent event: `event: <name>\ndata: <json>\n\n`, with `id: <id>` after its data
 * when it has one (a client that reconnects sends the last one as `Last-Event-ID`).
 */
export function sseFrame(event: string, data: unknown, id?: string): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n${id === undefined ? '' : `id: ${id}\n`}\n`;
}

/**
 * The events a client that saw `lastEventId` has not: those after it. An id this buffer no
 * longer holds, or one another process issued (a restart, another runner), gives every event
 * held, after a count of the ones of this process between the two that were dropped
 * (`omitted`), when the id says how many.
 */
export function eventsAfter(
  events: readonly SessionEvent[],
  lastEventId: string | undefined,
): { events: readonly SessionEvent[]; omitted: number } {
  if (lastEventId === undefined) return { events, omitted: 0 };
  const index = events.findIndex((event) => event.id === lastEventId);
  if (index >= 0) return { events: events.slice(index + 1), omitted: 0 };
  const [epoch, seen] = lastEventId.split('-');
  const [firstEpoch, first] = events[0]?.id.split('-') ?? [];
  const gap = epoch === firstEpoch ? Number(first) - Number(seen) - 1 : 0;
  return { events, omitted: Number.isSafeInteger(gap) && gap > 0 ? gap : 0 };
}

/** The event that replaces the chunks a replay left out, oldest first: `{"type":"replay_truncated","omitted":N}`. */
export function truncatedFrame(omitted: number): string {
  return sseFrame('replay_truncated', { type: 'replay_truncated', omitted });
}

/** The last event of every open stream when the server shuts down. */
export const SHUTDOWN_FRAME = sseFrame('shutdown', { type: 'shutdown' });

/**
 * The frames of a replay within `maxBytes` (UTF-8): the newest chunks that fit,
 * oldest first, preceded by one `replay_truncated` event counting the older
 * chunks left out when there are any. The total, summary included, never
 * exceeds `maxBytes`.
 */
export function boundedReplay(events: readonly SessionEvent[], maxBytes: number, omittedBefore = 0): string[] {
  const kept: string[] = [];
  let bytes = 0;
  let index = events.length - 1;
  for (; index >= 0; index--) {
    const { id, chunk } = events[index]!;
    const frame = sseFrame(chunk.type, chunk, id);
    const size = Buffer.byteLength(frame);
    // Room for the summary is kept whenever some chunk is still left to consider.
    const reserve = index > 0 || omittedBefore > 0 ? Buffer.byteLength(truncatedFrame(index + omittedBefore)) : 0;
    if (bytes + size + reserve > maxBytes) break;
    bytes += size;
    kept.push(frame);
  }
  kept.reverse();
  const omitted = index + 1 + omittedBefore;
  return omitted > 0 ? [truncatedFrame(omitted), ...kept] : kept;
}

interface DropLog {
  warn(fields: object, message: string): void;
}

/**
 * The open `GET /sessions/:id/stream` followers of one server: each gets live
 * chunks while its client keeps up (else it is dropped), and every one is
 * ended with a `shutdown` event when the server closes.
 */
export class StreamFollowers {
  readonly #open = new Map<ServerResponse, () => void>();
  readonly #limits: StreamLimits;
  readonly #log: DropLog | undefined;
  /** Followers dropped for not reading, since start. */
  dropped = 0;

  constructor(limits: StreamLimits = DEFAULT_STREAM_LIMITS, log?: DropLog) {
    this.#limits = limits;
    this.#log = log;
  }

  get limits(): StreamLimits {
    return this.#limits;
  }

  /** Open followers right now. */
  get size(): number {
    return this.#open.size;
  }

  /**
   * Registers `raw` as a follower; `subscribe` attaches the live chunks and
   * returns the detach function. Ends when the client goes, when it is dropped
   * or at shutdown.
   */
  follow(raw: ServerResponse, sessionId: string, subscribe: (send: (event: SessionEvent) => void) => () => void): void {
    let detach: () => void = () => {};
    const forget = () => {
      detach();
      this.#open.delete(raw);
    };
    detach = subscribe(({ id, chunk }) => {
      if (raw.destroyed || raw.writableEnded) return;
      // Bytes the client has not taken yet: past the bound, the follower is dropped, not buffered.
      if (raw.writableLength > this.#limits.bufferBytes) {
        this.dropped += 1;
        this.#log?.warn(
          { sessionId, bufferedBytes: raw.writableLength, limitBytes: this.#limits.bufferBytes },
          'stream follower dropped: its client does not read',
        );
        forget();
        raw.destroy();
        return;
      }
      raw.write(sseFrame(chunk.type, chunk, id));
    });
    this.#open.set(raw, forget);
    raw.once('close', forget);
  }

  /** Ends every open stream with a `shutdown` event (a follower already over its bound is destroyed instead). */
  endAll(): void {
    for (const [raw, forget] of [...this.#open]) {
      forget();
      if (raw.destroyed || raw.writableEnded) continue;
      if (raw.writableLength > this.#limits.bufferBytes) {
        raw.destroy();
        continue;
      }
      raw.end(SHUTDOWN_FRAME);
    }
  }
}
