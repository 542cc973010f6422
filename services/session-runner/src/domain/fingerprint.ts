import { hash } from 'node:crypto';
import type { SourcedItem } from '@ctxflow/contracts';

/** JSON with the keys of every object sorted: equal values, equal text. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i > 0 ? ',' : '') + canonical(value[i]);
    return `${out}]`;
  }
  if (value && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    let out = '{';
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      out += `${i > 0 ? ',' : ''}${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`;
    }
    return `${out}}`;
  }
  return JSON.stringify(value);
}

/** The identity of a request's items for its idempotency key (R13). */
export function fingerprint(items: SourcedItem[]): string {
  return hash('sha256', canonical(items), 'hex');
}

/** Raw items longer than this are remembered by their SHA-256 instead of their JSON text. */
const RAW_ITEMS_TEXT_MAX = 1024;

/**
 * The identity of a request's items exactly as received, for a replayed key: their JSON
 * text, or its SHA-256 (hex) when longer than RAW_ITEMS_TEXT_MAX (a JSON array starts
 * with `[`, a digest never does). Equal raw items validate to the same items, so to the
 * same fingerprint. Undefined for anything but a JSON array (the full path judges it).
 */
export function rawItems(items: unknown): string | undefined {
  if (!Array.isArray(items)) return undefined;
  let json: string;
  try {
    json = JSON.stringify(items);
  } catch {
    return undefined;
  }
  return json.length <= RAW_ITEMS_TEXT_MAX ? json : hash('sha256', json, 'hex');
}
