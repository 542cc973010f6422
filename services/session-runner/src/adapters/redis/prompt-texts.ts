import { hash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { StepRecord } from '../../domain/model.ts';
import type { StoredStep } from './session-scripts.ts';

/** Default bound of each prompt cache: 16 MiB (the session-runner's heap budget in docs/operations.md). */
export const DEFAULT_PROMPT_CACHE_BYTES = 16 * 1024 * 1024;
/** Most prompts each prompt cache holds, whatever their size. */
const PROMPT_CACHE_ENTRIES = 1_000;

/**
 * Estimated heap bytes of a prompt cache entry: both strings at 2 bytes per
 * UTF-16 unit (V8's two-byte strings; one-byte ones take half) plus the
 * cache's own per-entry bookkeeping.
 */
export function promptEntryBytes(key: string, value: string): number {
  return 2 * (key.length + value.length) + 64;
}

const promptCache = (maxSize: number) =>
  new LRUCache<string, string>({
    max: PROMPT_CACHE_ENTRIES,
    maxSize,
    sizeCalculation: (value, key) => promptEntryBytes(key, value),
  });

/**
 * The system prompts of step records: a step record names its prompt by id (a hash of
 * the text), the text is stored once per session in its `prompts` hash (keys.ts). Two
 * bounded caches, text -> id and id -> text, of `maxBytes` each (estimated): a prompt
 * bigger than that is not cached (its id is computed, its text read from Redis).
 */
export class PromptTexts {
  readonly #ids: LRUCache<string, string>;
  readonly #texts: LRUCache<string, string>;

  constructor(maxBytes: number) {
    this.#ids = promptCache(maxBytes);
    this.#texts = promptCache(maxBytes);
  }

  /** Estimated bytes the caches hold now: text -> id and id -> text. */
  get bytes(): { ids: number; texts: number } {
    return { ids: this.#ids.calculatedSize, texts: this.#texts.calculatedSize };
  }

  /** The id of a system prompt: a hash of its text ('' for none, kept in the record). */
  idOf(text: string): string {
    if (text === '') return '';
    let id = this.#ids.get(text);
    if (id === undefined) {
      id = hash('sha256', text, 'base64url').slice(0, 22);
      this.#ids.set(text, id);
      this.#texts.set(id, text);
    }
    return id;
  }

  /**
   * Step records from their stored JSON, each with its system prompt's text: a record
   * written before prompts were stored apart has it in itself; the texts not cached are
   * read with `read` (the session's `prompts` hash, HMGET of the ids) in one call.
   */
  async stepRecords(
    sessionId: string,
    jsons: readonly string[],
    read: (ids: string[]) => Promise<(string | null)[]>,
  ): Promise<StepRecord[]> {
    const stored = jsons.map((json) => JSON.parse(json) as StoredStep);
    const texts = new Map<string, string>();
    const missing: string[] = [];
    for (const step of stored) {
      const ref = step.systemRef;
      if (ref === undefined || texts.has(ref) || missing.includes(ref)) continue;
      const known = this.#texts.get(ref);
      if (known === undefined) missing.push(ref);
      else texts.set(ref, known);
    }
    if (missing.length > 0) {
      const found = await read(missing);
      missing.forEach((ref, i) => {
        const text = found[i];
        if (text === null || text === undefined) {
          throw new Error(`session ${sessionId}: a step record names prompt ${ref}, which is not stored`);
        }
        texts.set(ref, text);
        this.#texts.set(ref, text);
      });
    }
    return stored.map((step) => {
      if (step.systemRef === undefined) return step as StepRecord;
      const { systemRef, ...rest } = step;
      return { ...rest, system: texts.get(systemRef)! };
    });
  }
}
