import type { StreamChunk } from '../domain/model.ts';

/** The session's stream (`GET /sessions/:id/stream`). Never carries a context row (R4). */
export interface SessionEvents {
  publish(sessionId: string, chunk: StreamChunk): void;
  /** Recent chunks, oldest first (bounded). */
  recent(sessionId: string): StreamChunk[];
  subscribe(sessionId: string, listener: (chunk: StreamChunk) => void): () => void;
  /** Drops the session's recent chunks (the session was erased); open followers get nothing more. */
  forget(sessionId: string): void;
}
