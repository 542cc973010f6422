/** RecentMap: the engine's bounded memory of facts that never change (a session's tenant and agent). */
import { RecentMap } from '@ctxflow/session-runner';
import { describe, expect, it } from 'vitest';

describe('RecentMap', () => {
  it('keeps the most recently used entries: a get or a set makes an entry the most recent', () => {
    const map = new RecentMap<string, number>(2);
    map.set('a', 1);
    map.set('b', 2);
    expect(map.get('a')).toBe(1);
    map.set('c', 3); // b is the least recent now
    expect(map.get('b')).toBeUndefined();
    expect(map.get('a')).toBe(1);
    expect(map.get('c')).toBe(3);
    map.set('c', 4);
    map.set('d', 5); // a is the least recent now
    expect(map.get('a')).toBeUndefined();
    expect([map.get('c'), map.get('d')]).toEqual([4, 5]);
  });
});

/** The reference: a Map re-inserted on every use (its insertion order is the recency). */
class ReferenceRecentMap<K, V> {
  readonly entries = new Map<K, V>();
  readonly limit: number;
  constructor(limit: number) {
    this.limit = limit;
  }
  get(key: K): V | undefined {
    const value = this.entries.get(key);
    if (value !== undefined) this.set(key, value);
    return value;
  }
  set(key: K, value: V): void {
    this.entries.delete(key);
    this.entries.set(key, value);
    if (this.entries.size > this.limit) this.entries.delete(this.entries.keys().next().value!);
  }
}

describe('RecentMap against a Map re-inserted on every use', () => {
  it('answers every get alike over 20,000 random gets and sets, limits 1, 2, 7 and 64', () => {
    let seed = 42;
    const random = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    for (const limit of [1, 2, 7, 64]) {
      const map = new RecentMap<number, number>(limit);
      const reference = new ReferenceRecentMap<number, number>(limit);
      const answers: [number | undefined, number | undefined][] = [];
      for (let i = 0; i < 5_000; i++) {
        const key = random(limit * 3);
        if (random(2) === 0) {
          map.set(key, i);
          reference.set(key, i);
        } else {
          answers.push([map.get(key), reference.get(key)]);
        }
      }
      // Then every key once, least recent first: a get of a kept key must not drop another.
      for (const key of [...reference.entries.keys()]) answers.push([map.get(key), reference.get(key)]);
      expect(answers.filter(([got, want]) => got !== want)).toEqual([]);
      expect(answers.filter(([got]) => got !== undefined).length).toBeGreaterThan(0);
    }
  });
});
