import type { z } from 'zod';
import { capText, MAX_ERROR_DETAIL_LENGTH, MAX_ERROR_DETAILS, MAX_ERROR_MESSAGE_LENGTH } from './limits.ts';

/**
 * The one registry of public error codes. The key is the code; each entry
 * carries its HTTP status and whether retrying the same request can help.
 * Every code here is documented in the README (a test checks it).
 */
export const errorCodes = {
  validation_error: {
    status: 400,
    retryable: false,
    summary: 'bad body, unknown kind, __finish__ switched off, item over 32 KiB',
  },
  unauthorized: { status: 401, retryable: false, summary: 'missing or wrong credentials, bad webhook signature' },
  forbidden: { status: 403, retryable: false, summary: "valid credentials without the route's scope" },
  state_session_not_found: {
    status: 404,
    retryable: false,
    summary: 'unknown session, or a session of another tenant',
  },
  state_agent_not_found: { status: 404, retryable: false, summary: 'unknown agent, or an agent of another tenant' },
  state_step_not_found: { status: 404, retryable: false, summary: 'unknown step id (rewind, branch)' },
  state_call_not_found: { status: 404, retryable: false, summary: 'unknown tool call (approval, client answer)' },
  feed_disabled: { status: 404, retryable: false, summary: 'a feed whose secret is not configured' },
  not_found: { status: 404, retryable: false, summary: 'no route for this method and path' },
  request_timeout: {
    status: 408,
    retryable: true,
    summary: 'the request did not arrive completely in time; the connection is closed',
  },
  state_context_key_conflict: { status: 409, retryable: false, summary: 'same idempotency key, other items' },
  state_agent_in_use: {
    status: 409,
    retryable: false,
    summary: 'the agent still has sessions; delete them, or the agent with ?cascade=true',
  },
  state_conflict: { status: 409, retryable: true, summary: 'the session changed while the request ran; send it again' },
  state_calls_pending: {
    status: 409,
    retryable: false,
    summary: 'a step or a user or assistant message while a call of the last assistant message has no result yet',
  },
  rate_limited: {
    status: 429,
    retryable: true,
    summary: 'the tenant is over its request rate; retry after the Retry-After delay',
  },
  quota_exceeded: { status: 429, retryable: false, summary: "a session over the tenant's cap of live sessions" },
  payload_too_large: { status: 413, retryable: false, summary: 'request body over the limit' },
  unsupported_media_type: {
    status: 415,
    retryable: false,
    summary: 'a body in a media type the route does not take (JSON routes take application/json)',
  },
  header_too_large: {
    status: 431,
    retryable: false,
    summary: 'request headers over the server limit; the connection is closed',
  },
  bus_unavailable: {
    status: 503,
    retryable: true,
    summary: 'the message bus did not acknowledge; retry after the Retry-After delay',
  },
  store_unavailable: { status: 503, retryable: true, summary: 'the store did not answer; retry' },
  internal_error: { status: 500, retryable: true, summary: 'an unexpected failure; nothing was half-written' },
} as const satisfies Record<string, { status: number; retryable: boolean; summary: string }>;

export type ErrorCode = keyof typeof errorCodes;

/**
 * A value of `details` as it is sent: arrays cut to MAX_ERROR_DETAILS entries,
 * strings to MAX_ERROR_DETAIL_LENGTH characters, objects to their first
 * MAX_ERROR_DETAILS properties, nesting to 4 levels. Input echoed in a refusal
 * stays small whatever the request carried.
 */
function boundDetails(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return capText(value, MAX_ERROR_DETAIL_LENGTH);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= 4) return '...';
  if (Array.isArray(value)) {
    const kept = value.slice(0, MAX_ERROR_DETAILS).map((v) => boundDetails(v, depth + 1));
    if (value.length > MAX_ERROR_DETAILS) kept.push(`... (${value.length - MAX_ERROR_DETAILS} more)`);
    return kept;
  }
  const out: Record<string, unknown> = {};
  let count = 0;
  for (const key in value) {
    if (count++ >= MAX_ERROR_DETAILS) break;
    out[capText(key, MAX_ERROR_DETAIL_LENGTH)] = boundDetails((value as Record<string, unknown>)[key], depth + 1);
  }
  return out;
}

/**
 * A refusal with a public code. Branch on `err.code`, never on `instanceof`.
 * The message is cut to MAX_ERROR_MESSAGE_LENGTH characters and `details` is
 * bounded (boundDetails): what a refusal echoes of the input stays small.
 */
export class CtxflowError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly retryable: boolean;
  readonly details: unknown;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; details?: unknown }) {
    super(
      capText(message, MAX_ERROR_MESSAGE_LENGTH),
      options?.cause === undefined ? undefined : { cause: options.cause },
    );
    this.name = 'CtxflowError';
    this.code = code;
    this.status = errorCodes[code].status;
    this.retryable = errorCodes[code].retryable;
    this.details = options?.details === undefined ? undefined : boundDetails(options.details);
  }
}

export function isCtxflowError(err: unknown): err is CtxflowError {
  return (
    typeof err === 'object' &&
    err !== null &&
    typeof (err as { code?: unknown }).code === 'string' &&
    (err as { code: string }).code in errorCodes &&
    (err as { name?: unknown }).name === 'CtxflowError'
  );
}

/** The wire shape of every error answer. */
export interface ErrorBody {
  error: { code: ErrorCode; message: string; retryable: boolean; details?: unknown };
}

/**
 * A refusal naming every problem zod found (at most MAX_ERROR_DETAILS of them, so a body of
 * 100,000 bad keys gets a short answer): `path: message; path: message`, `where` for an
 * issue at the root (`body`, `querystring`, `params`).
 */
export function validationRefusal(error: z.ZodError, where = 'body'): CtxflowError {
  const issues = error.issues.slice(0, MAX_ERROR_DETAILS);
  const message = issues.map((i) => `${i.path.length ? i.path.join('.') : where}: ${i.message}`).join('; ');
  return new CtxflowError('validation_error', message, {
    details: issues.map((i) => ({ path: i.path, message: i.message })),
  });
}

export function errorBody(err: CtxflowError): ErrorBody {
  const body: ErrorBody = { error: { code: err.code, message: err.message, retryable: err.retryable } };
  if (err.details !== undefined) body.error.details = err.details;
  return body;
}
