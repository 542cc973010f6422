/**
 * A map that keeps its `limit` most recently used entries: `get` and `set` make an
 * entry the most recent, and a `set` past the limit drops the least recent one.
 * For facts that never change once known (a session's tenant or agent), where a
 * dropped entry only costs a read.
 */
export class RecentMap<K, V> {
  readonly #entries = new Map<K, V>();
  readonly #limit: number;

  constructor(limit: number) {
    this.#limit = limit;
  }

  get(key: K): V | undefined {
    const value = this.#entries.get(key);
    if (value !== undefined) this.set(key, value);
    return value;
  }

  set(key: K, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    if (this.#entries.size > this.#limit) this.#entries.delete(this.#entries.keys().next().value!);
  }
}
