import type { StreamChunk } from '../domain/model.ts';

/**
 * One chunk of a session's stream with its event id: `<epoch>-<n>`, `n` counting the session's
 * chunks from 1 and `epoch` naming the process that numbered them, so an id seen before a restart
 * is never mistaken for one after it.
 */
export interface SessionEvent {
  id: string;
  chunk: StreamChunk;
}

/** The session's stream (`GET /sessions/:id/stream`). Never carries a context row (R4). */
export interface SessionEvents {
  publish(sessionId: string, chunk: StreamChunk): void;
  /** Recent chunks, oldest first (bounded). */
  recent(sessionId: string): StreamChunk[];
  /** The same recent chunks with their event ids, oldest first. */
  recentEvents(sessionId: string): SessionEvent[];
  subscribe(sessionId: string, listener: (event: SessionEvent) => void): () => void;
  /** Drops the session's recent chunks (the session was erased); open followers get nothing more. */
  forget(sessionId: string): void;
}
