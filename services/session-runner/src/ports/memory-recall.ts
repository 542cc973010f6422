/** Memories an agent recalls (R34). */
export interface MemoryRecall {
  /** Memories relevant to `query`, most relevant first. */
  recall(request: { agentId: string; sessionId: string; query: string }): Promise<string[]>;
  remember(agentId: string, content: string): Promise<void>;
  /** Erases every memory of the agent; nothing when it has none (idempotent). */
  forget(agentId: string): Promise<void>;
}
