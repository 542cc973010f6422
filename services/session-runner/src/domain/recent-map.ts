interface Entry<K, V> {
  key: K;
  value: V;
  /** The next more recent entry. */
  newer: Entry<K, V> | undefined;
  /** The next less recent entry. */
  older: Entry<K, V> | undefined;
}

/**
 * A map that keeps its `limit` most recently used entries: `get` and `set` make an
 * entry the most recent, and a `set` past the limit drops the least recent one.
 * For facts that never change once known (a session's tenant or agent), where a
 * dropped entry only costs a read.
 *
 * The order is a linked list beside the Map: a `get` moves its entry to the front
 * without touching the Map (a Map delete and re-insert per read costs about 1.5 µs
 * at 10,000 entries, from the table's rehashing).
 */
export class RecentMap<K, V> {
  readonly #entries = new Map<K, Entry<K, V>>();
  readonly #limit: number;
  #newest: Entry<K, V> | undefined;
  #oldest: Entry<K, V> | undefined;

  constructor(limit: number) {
    this.#limit = limit;
  }

  get(key: K): V | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    this.#touch(entry);
    return entry.value;
  }

  set(key: K, value: V): void {
    const entry = this.#entries.get(key);
    if (entry !== undefined) {
      entry.value = value;
      this.#touch(entry);
      return;
    }
    const added: Entry<K, V> = { key, value, newer: undefined, older: this.#newest };
    if (this.#newest !== undefined) this.#newest.newer = added;
    this.#newest = added;
    this.#oldest ??= added;
    this.#entries.set(key, added);
    if (this.#entries.size > this.#limit) {
      const oldest = this.#oldest;
      this.#unlink(oldest);
      this.#entries.delete(oldest.key);
    }
  }

  /** Makes an entry the most recent. */
  #touch(entry: Entry<K, V>): void {
    if (entry === this.#newest) return;
    this.#unlink(entry);
    entry.older = this.#newest;
    entry.newer = undefined;
    this.#newest!.newer = entry;
    this.#newest = entry;
  }

  #unlink(entry: Entry<K, V>): void {
    if (entry.newer === undefined) this.#newest = entry.older;
    else entry.newer.older = entry.older;
    if (entry.older === undefined) this.#oldest = entry.newer;
    else entry.older.newer = entry.newer;
    entry.newer = undefined;
    entry.older = undefined;
  }
}
