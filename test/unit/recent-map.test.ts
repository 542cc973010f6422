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
