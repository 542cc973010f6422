import { createParser, type EventSourceMessage } from 'eventsource-parser';

/** One event of a session's stream (`GET /sessions/:sessionId/stream`). */
export interface StreamEvent {
  /** The event's id; absent on the server's own notices (`replay_truncated`, `shutdown`). */
  id?: string;
  /** `message`, `step`, `rewind`, `context_skipped`, `replay_truncated`, `shutdown`. */
  event: string;
  /** The event's JSON data. */
  data: unknown;
}

export interface FollowOptions {
  /** Ends the iteration (and its connection). */
  signal?: AbortSignal;
  /** Start after this event (an id a previous follow yielded); default: the server's replay. */
  lastEventId?: string;
  /** First wait before reconnecting, doubled per failure in a row up to `maxRetryDelayMs` (200, 5000). */
  retryDelayMs?: number;
  maxRetryDelayMs?: number;
}

/** Opens the stream, after `lastEventId` when given. */
export type OpenStream = (lastEventId: string | undefined, signal: AbortSignal | undefined) => Promise<Response>;

/** The error an answer that is not the stream stands for, and whether reconnecting can help. */
export type Refusal = (response: Response) => Promise<{ error: Error; retryable: boolean }>;

function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * A session's stream as an async iterator that outlives its connections: when one drops (a reset,
 * a runner restart, the server's `shutdown`), it reconnects with `Last-Event-ID`, so the server
 * replays only what came after the last event yielded: nothing lost while the server still holds
 * it, nothing repeated. Events the server no longer holds arrive as one `replay_truncated` event
 * counting them. Ends when `signal` aborts; throws a refusal that reconnecting cannot fix (the
 * session erased: 404; a revoked key: 401).
 */
export async function* followStream(open: OpenStream, refusal: Refusal, options: FollowOptions = {}) {
  const { signal } = options;
  const first = options.retryDelayMs ?? 200;
  const max = options.maxRetryDelayMs ?? 5_000;
  let lastEventId = options.lastEventId;
  let failures = 0;
  while (!signal?.aborted) {
    let response: Response;
    try {
      response = await open(lastEventId, signal);
    } catch {
      if (signal?.aborted) return;
      await wait(Math.min(max, first * 2 ** failures++), signal);
      continue;
    }
    if (!response.ok || response.body === null) {
      const { error, retryable } = await refusal(response);
      if (!retryable) throw error;
      await wait(Math.min(max, first * 2 ** failures++), signal);
      continue;
    }
    const received: EventSourceMessage[] = [];
    const parser = createParser({ onEvent: (message) => received.push(message) });
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.feed(value);
        for (const message of received.splice(0)) {
          if (message.id !== undefined) lastEventId = message.id;
          failures = 0;
          yield {
            ...(message.id === undefined ? {} : { id: message.id }),
            event: message.event ?? 'message',
            data: JSON.parse(message.data) as unknown,
          } satisfies StreamEvent;
        }
      }
    } catch {
      // The connection dropped: reconnect below, after the last event yielded.
    } finally {
      reader.cancel().catch(() => {});
    }
    if (signal?.aborted) return;
    await wait(Math.min(max, first * 2 ** failures++), signal);
  }
}
