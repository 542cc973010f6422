/** adapters/text-memo.ts: a memo of a pure function of a text, bounded by the bytes of the texts it keeps. */
import { describe, expect, it } from 'vitest';
import { textMemo } from '../../src/adapters/text-memo.ts';

describe('textMemo', () => {
  it('computes a text once while it is kept, and gives what the function gives', () => {
    const seen: string[] = [];
    const size = textMemo((text: string) => {
      seen.push(text);
      return text.length * 10;
    }, 10_000);
    expect([size('ab'), size('ab'), size('abc'), size('ab')]).toEqual([20, 20, 30, 20]);
    expect(seen).toEqual(['ab', 'abc']);
  });

  it('keeps texts within its byte bound, the least recently used out first; a text over the bound is not kept', () => {
    const seen: string[] = [];
    // Each 100-character text takes 96 + 2 * 100 = 296 estimated bytes: three fit in 900.
    const size = textMemo((text: string) => {
      seen.push(text);
      return text.length;
    }, 900);
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((ch) => ch.repeat(100)) as [string, string, string, string];
    for (const text of [a, b, c, a, d]) size(text); // d pushes out b, the least recently used
    seen.length = 0;
    for (const text of [a, c, d, b]) size(text);
    expect(seen).toEqual([b]);
    const huge = 'x'.repeat(1_000);
    expect([size(huge), size(huge)]).toEqual([1_000, 1_000]);
    expect(seen).toEqual([b, huge, huge]);
  });
});
