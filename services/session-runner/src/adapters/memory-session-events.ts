import { randomBytes } from 'node:crypto';
import type { StreamChunk } from '../domain/model.ts';
import type { SessionEvent, SessionEvents } from '../ports/session-events.ts';

/** In-process session streams with a bounded replay buffer per session. */
export class MemorySessionEvents implements SessionEvents {
  readonly #recent = new Map<string, SessionEvent[]>();
  readonly #counts = new Map<string, number>();
  readonly #listeners = new Map<string, Set<(event: SessionEvent) => void>>();
  readonly #limit: number;
  /** This process's part of every event id it issues. */
  readonly #epoch = randomBytes(4).toString('hex');

  constructor(limit = 500) {
    this.#limit = limit;
  }

  publish(sessionId: string, chunk: StreamChunk): void {
    const count = (this.#counts.get(sessionId) ?? 0) + 1;
    this.#counts.set(sessionId, count);
    const event: SessionEvent = { id: `${this.#epoch}-${count}`, chunk };
    const buffer = this.#recent.get(sessionId) ?? [];
    buffer.push(event);
    if (buffer.length > this.#limit) buffer.splice(0, buffer.length - this.#limit);
    this.#recent.set(sessionId, buffer);
    for (const listener of this.#listeners.get(sessionId) ?? []) listener(event);
  }

  recent(sessionId: string): StreamChunk[] {
    return (this.#recent.get(sessionId) ?? []).map((event) => event.chunk);
  }

  recentEvents(sessionId: string): SessionEvent[] {
    return [...(this.#recent.get(sessionId) ?? [])];
  }

  subscribe(sessionId: string, listener: (event: SessionEvent) => void): () => void {
    const set = this.#listeners.get(sessionId) ?? new Set();
    set.add(listener);
    this.#listeners.set(sessionId, set);
    return () => set.delete(listener);
  }

  forget(sessionId: string): void {
    this.#recent.delete(sessionId);
    this.#counts.delete(sessionId);
    this.#listeners.delete(sessionId);
  }
}
