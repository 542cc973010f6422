import { singleHeader } from '../verifiers/verifier.ts';
import type { FeedDelivery } from './normalizer.ts';

/** The longest event id a TicketUpdate carries. */
const MAX_EVENT_ID = 256;

/** A delivery-id header's value when it is present and fits an event id; otherwise undefined. */
export function headerId(headers: FeedDelivery['headers'], name: string): string | undefined {
  const value = singleHeader(headers, name)?.trim();
  return value && value.length <= MAX_EVENT_ID ? value : undefined;
}

/** A sender's time as ISO-8601 UTC when it parses (`2015-05-17 17:06:40 UTC` too), else as given. */
export function isoTime(value: string): string {
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? new Date(ms).toISOString() : value;
}

/** Longest value shown for a changed field that is a list or an object. */
const MAX_SHOWN = 1024;

/**
 * A changed field's value as TicketChange wants it: strings as they are,
 * numbers and booleans as text, none as null; a list of named things (labels,
 * users) as their names, anything else as its JSON.
 */
export function changeValue(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value) && value.every((item) => nameOf(item) !== undefined)) {
    return value.map((item) => nameOf(item)).join(', ');
  }
  const json = JSON.stringify(value) ?? null;
  return json !== null && json.length > MAX_SHOWN ? `${json.slice(0, MAX_SHOWN - 1)}…` : json;
}

function nameOf(item: unknown): string | undefined {
  if (typeof item === 'string') return item;
  if (typeof item !== 'object' || item === null) return undefined;
  for (const key of ['title', 'name', 'username']) {
    const value = Object.hasOwn(item, key) ? (item as Record<string, unknown>)[key] : undefined;
    if (typeof value === 'string') return value;
  }
  return undefined;
}
