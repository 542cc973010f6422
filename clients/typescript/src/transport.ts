/**
 * What every call of `CtxflowClient` goes through: the error it throws, one request as the client
 * sends it, and reading an answer that may not be ctxflow's (a proxy, a gateway).
 */
import type { ErrorBody, ErrorCode } from './types.ts';

/** A refusal of the API (`{"error":{"code","message","retryable"}}`) or a failure to reach it. */
export class CtxflowApiError extends Error {
  override readonly name = 'CtxflowApiError';
  /** The HTTP status; 0 when no answer arrived (network failure, timeout). */
  readonly status: number;
  /** A public error code; `network_error` when no answer arrived, `unexpected_answer` for an answer not in the error form. */
  readonly code: ErrorCode | 'network_error' | 'unexpected_answer';
  /** Whether sending the same request again can help. */
  readonly retryable: boolean;
  readonly details: unknown;

  constructor(
    status: number,
    code: CtxflowApiError['code'],
    message: string,
    retryable: boolean,
    details?: unknown,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.status = status;
    this.code = code;
    this.retryable = retryable;
    this.details = details;
  }
}

export interface Send {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  body?: unknown;
  /** Sending it again cannot do anything twice: a lost answer (network failure) may be retried. */
  idempotent: boolean;
  signal?: AbortSignal;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function isErrorBody(value: unknown): value is ErrorBody {
  if (typeof value !== 'object' || value === null || !('error' in value)) return false;
  const error = (value as { error: unknown }).error;
  return (
    typeof error === 'object' &&
    error !== null &&
    typeof (error as { code?: unknown }).code === 'string' &&
    typeof (error as { retryable?: unknown }).retryable === 'boolean'
  );
}

/** An answer's text and its JSON (the text itself when it is not JSON; undefined when empty). */
export async function readAnswer(response: Response): Promise<{ text: string; parsed: unknown }> {
  const text = await response.text();
  try {
    return { text, parsed: text === '' ? undefined : JSON.parse(text) };
  } catch {
    return { text, parsed: text };
  }
}

/** The error an answer that is not a success stands for. */
export function answerError(status: number, parsed: unknown, text: string, what: string): CtxflowApiError {
  if (isErrorBody(parsed)) {
    const e = parsed.error;
    return new CtxflowApiError(status, e.code, e.message, e.retryable, e.details);
  }
  // Not ctxflow's answer (a proxy, a gateway): a 502/503/504 may pass.
  const retryable = status === 502 || status === 503 || status === 504;
  return new CtxflowApiError(status, 'unexpected_answer', `HTTP ${status} from ${what}`, retryable, text.slice(0, 500));
}
