import type { MemoryRecall } from '../ports/memory-recall.ts';

/** In-process memories per agent; recall returns every memory, newest first. */
export class MemoryMemoryRecall implements MemoryRecall {
  readonly #memories = new Map<string, string[]>();

  async recall(request: { agentId: string }): Promise<string[]> {
    return [...(this.#memories.get(request.agentId) ?? [])].reverse();
  }

  async remember(agentId: string, content: string): Promise<void> {
    const list = this.#memories.get(agentId) ?? [];
    list.push(content);
    this.#memories.set(agentId, list);
  }

  async forget(agentId: string): Promise<void> {
    this.#memories.delete(agentId);
  }
}
