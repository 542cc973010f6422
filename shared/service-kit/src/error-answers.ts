import { type ErrorCode, errorCodes } from '@ctxflow/contracts';
import { z } from 'zod';

/** The component name of the error answer at each status the servers send. */
const NAMES: Record<number, string> = {
  400: 'BadRequestError',
  401: 'UnauthorizedError',
  403: 'ForbiddenError',
  404: 'NotFoundError',
  408: 'RequestTimeoutError',
  409: 'ConflictError',
  413: 'PayloadTooLargeError',
  415: 'UnsupportedMediaTypeError',
  429: 'TooManyRequestsError',
  431: 'HeaderTooLargeError',
  500: 'InternalError',
  503: 'UnavailableError',
};

export type ErrorStatus = 400 | 401 | 403 | 404 | 408 | 409 | 413 | 415 | 429 | 431 | 500 | 503;

function codesAt(status: number): [ErrorCode, ...ErrorCode[]] {
  const codes = (Object.keys(errorCodes) as ErrorCode[]).filter((code) => errorCodes[code].status === status);
  if (codes.length === 0) throw new Error(`no error code answers with status ${status}`);
  return codes as [ErrorCode, ...ErrorCode[]];
}

function errorAnswer(status: ErrorStatus) {
  const codes = codesAt(status);
  const name = NAMES[status]!;
  return z
    .object({
      error: z
        .object({
          code: z.enum(codes).describe(codes.map((c) => `\`${c}\`: ${errorCodes[c].summary}`).join('; ')),
          message: z.string().describe('What was wrong, for a person; never echoes the request'),
          retryable: z.boolean().describe('Whether sending the same request again can succeed'),
          details: z.unknown().optional().describe('For validation errors: each problem, `{ path, message }`'),
        })
        .meta({ id: `${name}Body`, title: `${name}Body` }),
    })
    .meta({ id: name, title: name, description: `The error answer with status ${status}` });
}

/** Every status's error answer schema, built once (a component of the OpenAPI document each). */
export const ERROR_ANSWERS = Object.fromEntries(
  (Object.keys(NAMES).map(Number) as ErrorStatus[]).map((status) => [status, errorAnswer(status)]),
) as Record<ErrorStatus, ReturnType<typeof errorAnswer>>;

/** Route `schema.response` entries for these error statuses. */
export function errorAnswers(...statuses: ErrorStatus[]): Partial<Record<ErrorStatus, z.ZodType>> {
  return Object.fromEntries(statuses.map((status) => [status, ERROR_ANSWERS[status]]));
}
