import { LRUCache } from 'lru-cache';

/** The heap V8 takes for a kept string and its cache entry besides its characters. */
const ENTRY_OVERHEAD = 96;

/**
 * A memo of a pure function of a text (a system prompt's size: the same prefix repeats for every
 * step of a session), bounded by the estimated heap bytes of the texts it keeps, least recently used
 * first out (lru-cache `maxSize`). Strings take up to two bytes a character; a text whose entry is
 * over the whole bound is computed and not kept.
 */
export function textMemo<T extends NonNullable<unknown>>(
  fn: (text: string) => T,
  maxBytes: number,
): (text: string) => T {
  const kept = new LRUCache<string, T>({
    maxSize: maxBytes,
    sizeCalculation: (_value, text) => ENTRY_OVERHEAD + 2 * text.length,
  });
  return (text) => {
    let value = kept.get(text);
    if (value === undefined) {
      value = fn(text);
      kept.set(text, value);
    }
    return value;
  };
}
