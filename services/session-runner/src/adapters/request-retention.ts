/**
 * Retention of a session's request-id records (`requestId` -> its step, what makes a step
 * request idempotent). A runtime sends a request id again only to retry a step it got no
 * answer for, before it sends the session's next steps, and the step-request consumer
 * redelivers only the records after its committed offset: a request id 1,000 committed steps
 * of its session later is past both. So a store keeps the records of the session's last
 * `requestIdsKept` steps with a request id (CTXFLOW_REQUEST_IDS_KEPT) and deletes older ones;
 * a request id it no longer keeps runs as a new step. The step records themselves (the
 * session's history) stay.
 */

/** Request-id records a session keeps by default. */
export const DEFAULT_REQUEST_IDS_KEPT = 1_000;

/**
 * How often (in the session's steps) the Redis store deletes the records past the retention
 * (trim-requests.lua): a session keeps between `requestIdsKept` and `requestIdsKept + 99`.
 */
export const REQUEST_TRIM_EVERY = 100;

/** Checks a retention setting: a whole number of request ids, at least 1. */
export function requestIdsKeptOf(value: number | undefined): number {
  return keptOf('requestIdsKept', value, DEFAULT_REQUEST_IDS_KEPT);
}

/*
 * The same rule for the other records a runtime sends again only soon after: a tool call's
 * record (its gate decision, approval and client answer, by call id, with the call's sites:
 * what its tool and hook items were recorded under) and an app request key of `POST /context`
 * (its items' fingerprint). A runtime re-sends a call id while the call's assistant turn is
 * open, and a key while it retries the request that got no answer. So a store keeps the call
 * records of the session's last `callIdsKept` calls (CTXFLOW_CALL_IDS_KEPT) and the session's
 * last `requestKeysKept` keys (CTXFLOW_REQUEST_KEYS_KEPT), oldest first out; the Redis store
 * deletes them every RECORD_TRIM_EVERY new calls or keys of the session (put-call.lua,
 * enqueue.lua), the in-memory store at each write. Past the bound a call id is a call never
 * seen (the gate decides it again; an approval or a client answer for it is
 * `state_call_not_found`), a call site records its items again, and a key records its items
 * again (no replay, no `state_context_key_conflict`). The log (the calls and their results as
 * messages) stays.
 */

/** Call records (and their call sites) a session keeps by default: more than any one turn's calls. */
export const DEFAULT_CALL_IDS_KEPT = 1_000;

/** App request keys a session keeps by default. */
export const DEFAULT_REQUEST_KEYS_KEPT = 1_000;

/** How often (in new calls or keys of the session) the Redis store deletes the records past the bound. */
export const RECORD_TRIM_EVERY = 100;

export function callIdsKeptOf(value: number | undefined): number {
  return keptOf('callIdsKept', value, DEFAULT_CALL_IDS_KEPT);
}

export function requestKeysKeptOf(value: number | undefined): number {
  return keptOf('requestKeysKept', value, DEFAULT_REQUEST_KEYS_KEPT);
}

function keptOf(name: string, value: number | undefined, fallback: number): number {
  const kept = value ?? fallback;
  if (!Number.isSafeInteger(kept) || kept < 1) throw new Error(`${name} ${kept} is not a whole number >= 1`);
  return kept;
}
