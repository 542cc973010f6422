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
  state_session_not_found: {
    status: 404,
    retryable: false,
    summary: 'unknown session, or a session of another tenant',
  },
  state_agent_not_found: { status: 404, retryable: false, summary: 'unknown agent, or an agent of another tenant' },
  state_step_not_found: { status: 404, retryable: false, summary: 'unknown step id (rewind, branch)' },
  state_call_not_found: { status: 404, retryable: false, summary: 'unknown tool call (approval, client answer)' },
  feed_disabled: { status: 404, retryable: false, summary: 'a feed whose secret is not configured' },
  state_context_key_conflict: { status: 409, retryable: false, summary: 'same idempotency key, other items' },
  state_conflict: { status: 409, retryable: true, summary: 'the session changed while the request ran; send it again' },
  state_calls_pending: {
    status: 409,
    retryable: false,
    summary: 'a step or a user or assistant message while a call of the last assistant message has no result yet',
  },
  payload_too_large: { status: 413, retryable: false, summary: 'request body over the limit' },
  bus_unavailable: {
    status: 503,
    retryable: true,
    summary: 'the message bus did not acknowledge; retry after the Retry-After delay',
  },
  store_unavailable: { status: 503, retryable: true, summary: 'the store did not answer; retry' },
  internal_error: { status: 500, retryable: true, summary: 'an unexpected failure; nothing was half-written' },
} as const satisfies Record<string, { status: number; retryable: boolean; summary: string }>;

export type ErrorCode = keyof typeof errorCodes;

/** A refusal with a public code. Branch on `err.code`, never on `instanceof`. */
export class CtxflowError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly retryable: boolean;
  readonly details: unknown;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; details?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CtxflowError';
    this.code = code;
    this.status = errorCodes[code].status;
    this.retryable = errorCodes[code].retryable;
    this.details = options?.details;
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

export function errorBody(err: CtxflowError): ErrorBody {
  const body: ErrorBody = { error: { code: err.code, message: err.message, retryable: err.retryable } };
  if (err.details !== undefined) body.error.details = err.details;
  return body;
}
