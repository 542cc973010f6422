import type { Cluster, Redis } from 'ioredis';
import type { MemoryRecall } from '../ports/memory-recall.ts';

/** Memories per agent in a Redis list (newest last); recall returns them newest first. */
export class RedisMemoryRecall implements MemoryRecall {
  readonly #client: Redis | Cluster;
  readonly #prefix: string;

  constructor(client: Redis | Cluster, options: { prefix?: string } = {}) {
    this.#client = client;
    this.#prefix = options.prefix ?? 'ctxflow';
  }

  #key(agentId: string) {
    return `${this.#prefix}:{agent:${agentId}}:memories`;
  }

  async recall(request: { agentId: string }): Promise<string[]> {
    return (await this.#client.lrange(this.#key(request.agentId), 0, -1)).reverse();
  }

  async remember(agentId: string, content: string): Promise<void> {
    await this.#client.rpush(this.#key(agentId), content);
  }

  async forget(agentId: string): Promise<void> {
    await this.#client.del(this.#key(agentId));
  }
}
