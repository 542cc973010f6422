import type { StreamChunk } from '../domain/model.ts';
import type { SessionEvents } from '../ports/session-events.ts';

/** In-process session streams with a bounded replay buffer per session. */
export class MemorySessionEvents implements SessionEvents {
  readonly #recent = new Map<string, StreamChunk[]>();
  readonly #listeners = new Map<string, Set<(chunk: StreamChunk) => void>>();
  readonly #limit: number;

  constructor(limit = 500) {
    this.#limit = limit;
  }

  publish(sessionId: string, chunk: StreamChunk): void {
    const buffer = this.#recent.get(sessionId) ?? [];
    buffer.push(chunk);
    if (buffer.length > this.#limit) buffer.splice(0, buffer.length - this.#limit);
    this.#recent.set(sessionId, buffer);
    for (const listener of this.#listeners.get(sessionId) ?? []) listener(chunk);
  }

  recent(sessionId: string): StreamChunk[] {
    return [...(this.#recent.get(sessionId) ?? [])];
  }

  subscribe(sessionId: string, listener: (chunk: StreamChunk) => void): () => void {
    const set = this.#listeners.get(sessionId) ?? new Set();
    set.add(listener);
    this.#listeners.set(sessionId, set);
    return () => set.delete(listener);
  }

  forget(sessionId: string): void {
    this.#recent.delete(sessionId);
    this.#listeners.delete(sessionId);
  }
}
