import { CtxflowError, errorBody, isCtxflowError } from '@ctxflow/contracts';
import type { FastifyError, FastifyInstance } from 'fastify';

/** Fastify's own refusals, mapped to public codes. */
function fromFastify(err: FastifyError): CtxflowError | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new CtxflowError('payload_too_large', 'request body is over the size limit');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new CtxflowError('validation_error', `body: ${err.message}`);
    case 'FST_ERR_VALIDATION':
      return new CtxflowError('validation_error', err.message);
  }
  if (err instanceof SyntaxError || (err.statusCode === 400 && !err.code?.startsWith('FST_ERR_'))) {
    return new CtxflowError('validation_error', `body: ${err.message}`);
  }
  return undefined;
}

/**
 * Every error answer is `{ error: { code, message, retryable } }`. Unknown
 * failures are 500 `internal_error` with a fixed message: internals and
 * request bodies never leak into the answer.
 */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const known = isCtxflowError(err) ? err : fromFastify(err);
    if (known) {
      if (known.code === 'bus_unavailable' || known.code === 'store_unavailable') reply.header('retry-after', '1');
      return reply.status(known.status).send(errorBody(known));
    }
    request.log.error({ err }, 'unhandled error');
    const internal = new CtxflowError('internal_error', 'internal error');
    return reply.status(500).send(errorBody(internal));
  });
  app.setNotFoundHandler((request, reply) => {
    reply.status(404).send({
      error: {
        code: 'not_found',
        message: `no route ${request.method} ${request.url.split('?')[0]}`,
        retryable: false,
      },
    });
  });
}
