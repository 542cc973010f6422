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
  const kept = value ?? DEFAULT_REQUEST_IDS_KEPT;
  if (!Number.isSafeInteger(kept) || kept < 1) throw new Error(`requestIdsKept ${kept} is not a whole number >= 1`);
  return kept;
}
