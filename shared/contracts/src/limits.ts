import { z } from 'zod';

/**
 * The public API's limits, in one place: request schemas, the router and the
 * error answers all read them from here, and the README's API tables list them.
 */

/**
 * zod's message for properties an object does not declare quotes their names: text the
 * caller chose, which a refusal never echoes. Every schema of the process counts them instead
 * (zod's global error customization; the other messages are zod's own).
 */
z.config({
  customError: (issue) => {
    if (issue.code !== 'unrecognized_keys') return undefined;
    const n = issue.keys.length;
    return `${n === 1 ? '1 unknown property' : `${n} unknown properties`} (this object takes only the properties it declares)`;
  },
});

/**
 * Every id a client names (sessionId, agentId, callId, stepId, requestId,
 * idempotency key, block id), in a body or in a path: 1 to 256 characters
 * (UTF-16 units, as JavaScript and zod count them). The router's
 * `maxParamLength` is this same number, so an id a body may carry is always
 * reachable in a path.
 */
export const MAX_ID_LENGTH = 256;

/** A schema for one id: a non-empty string of at most MAX_ID_LENGTH characters. */
export const idSchema = z.string().min(1).max(MAX_ID_LENGTH);

/** A client tool's answer deadline: at most 7 days. */
export const MAX_DEADLINE_MS = 7 * 24 * 60 * 60 * 1000;

/** An agent's prompt-cache lifetime: at most 24 hours. */
export const MAX_CACHE_TTL_MS = 24 * 60 * 60 * 1000;

/** A stepContext batch: at most 4 MiB (the runner's and step-context's limit alike). */
export const MAX_BATCH_BYTES = 4 * 1024 * 1024;

/** Context blocks of an agent or a thread: at most this many, after a merge too. */
export const MAX_CONTEXT_BLOCKS = 1_000;

/** Context blocks of an agent or a thread: at most this many UTF-8 bytes of ids and contents, after a merge too. */
export const MAX_CONTEXT_BYTES = 1024 * 1024;

/**
 * Request body limit of the routes whose body is context blocks alone (PATCH /agents/:id,
 * POST /sessions, PATCH /sessions/:id): room for MAX_CONTEXT_BYTES with JSON's quoting, so a
 * body far over what could be accepted is refused (413) before it is parsed.
 */
export const MAX_CONTEXT_BODY_BYTES = 2 * MAX_CONTEXT_BYTES;

/** An error answer's `message`: at most this many characters of it are sent. */
export const MAX_ERROR_MESSAGE_LENGTH = 1_024;

/** An error answer's `details`: at most this many entries. */
export const MAX_ERROR_DETAILS = 20;

/** One string inside an error answer's `details`: at most this many characters. */
export const MAX_ERROR_DETAIL_LENGTH = 256;

/**
 * Cuts a text to at most `max` characters; a cut text ends with how much was
 * left out, so a reader knows it is not whole. The result is never longer than
 * `max`, and never splits a surrogate pair.
 */
export function capText(text: string, max: number): string {
  if (text.length <= max) return text;
  const note = (omitted: number) => `... (${omitted} more characters)`;
  let keep = Math.max(0, max - note(text.length).length);
  if (keep > 0 && /[\uD800-\uDBFF]/.test(text[keep - 1]!)) keep -= 1;
  return text.slice(0, keep) + note(text.length - keep);
}

/** A JSON value a client gives (a cursor): at most this many levels of arrays and objects. */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether a parsed JSON value nests at most `max` levels of arrays and objects.
 * Iterative, so a value nested deeper than the call stack is measured, not a crash.
 */
export function jsonDepthWithin(value: unknown, max = MAX_JSON_DEPTH): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [next, depth] = stack.pop()!;
    if (next === null || typeof next !== 'object') continue;
    if (depth + 1 > max) return false;
    for (const child of Array.isArray(next) ? next : Object.values(next)) stack.push([child, depth + 1]);
  }
  return true;
}
