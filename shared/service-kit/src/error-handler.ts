import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { CtxflowError, type ErrorCode, errorBody, isCtxflowError, MAX_ID_LENGTH } from '@ctxflow/contracts';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** Fastify's own refusals, mapped to public codes. */
function fromFastify(err: FastifyError): CtxflowError | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new CtxflowError('payload_too_large', 'request body is over the size limit');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new CtxflowError('unsupported_media_type', 'content-type: this route takes application/json');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new CtxflowError('validation_error', `body: ${err.message}`);
    case 'FST_ERR_VALIDATION':
      return new CtxflowError('validation_error', err.message);
    case 'FST_ERR_BAD_URL':
      // The router's message quotes the path: the answer names the problem only.
      return new CtxflowError('validation_error', 'path: a malformed %-escape');
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new CtxflowError('validation_error', `path: an id is over the ${MAX_ID_LENGTH}-character limit`);
  }
  if (err instanceof SyntaxError || (err.statusCode === 400 && !err.code?.startsWith('FST_ERR_'))) {
    return new CtxflowError('validation_error', `body: ${err.message}`);
  }
  return undefined;
}

function send(reply: FastifyReply, err: CtxflowError) {
  if (err.code === 'bus_unavailable' || err.code === 'store_unavailable') reply.header('retry-after', '1');
  return reply.status(err.status).send(errorBody(err));
}

/**
 * Fastify's `frameworkErrors` option: the router's refusals (FST_ERR_BAD_URL,
 * FST_ERR_MAX_PARAM_LENGTH, FST_ERR_ASYNC_CONSTRAINT) in the error form,
 * without echoing the path.
 */
export function frameworkErrors(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const known = fromFastify(err);
  if (known) return send(reply, known);
  request.log.error({ err }, 'router error');
  return send(reply, new CtxflowError('internal_error', 'internal error'));
}

/**
 * Fastify's `clientErrorHandler` option: what Node's HTTP parser refuses before
 * any route runs (headers over the size limit: 431 `header_too_large`; a request
 * that did not arrive in time: 408 `request_timeout`; anything malformed: 400
 * `validation_error`), answered in the error form, then the connection closed.
 */
export function clientErrorHandler(this: FastifyInstance, err: NodeJS.ErrnoException, socket: Socket): void {
  // A reset connection has no one to answer (https://nodejs.org/api/http.html#event-clienterror).
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  let code: ErrorCode = 'validation_error';
  let message = 'a malformed HTTP request';
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    code = 'header_too_large';
    message = 'request headers are over the server limit';
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    code = 'request_timeout';
    message = 'the request did not arrive completely in time';
  }
  const refusal = new CtxflowError(code, message);
  const body = JSON.stringify(errorBody(refusal));
  this.log.debug({ code: err.code }, 'client error');
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  // end, not destroy: the answer is flushed before the connection closes (a destroy with unread input
  // would reset it and lose the answer); a client that never closes its side is cut off after a second.
  socket.end(
    `HTTP/1.1 ${refusal.status} ${STATUS_CODES[refusal.status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Content-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
  );
  setTimeout(() => socket.destroy(), 1000).unref();
}

/**
 * Every error answer is `{ error: { code, message, retryable } }`. Unknown
 * failures are 500 `internal_error` with a fixed message: internals and
 * request bodies never leak into the answer.
 */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const known = isCtxflowError(err) ? err : fromFastify(err);
    if (known) return send(reply, known);
    if (err.code === 'FST_ERR_RESPONSE_SERIALIZATION') {
      // An answer its route does not declare: a defect of the server, never sent.
      const issues = (err.cause as { issues?: unknown } | undefined)?.issues;
      request.log.error({ route: request.routeOptions.url, issues }, 'answer does not match its declared schema');
    } else {
      request.log.error({ err }, 'unhandled error');
    }
    return send(reply, new CtxflowError('internal_error', 'internal error'));
  });
  // The path is never echoed: it may be long, or carry what the caller did not mean to log.
  app.setNotFoundHandler((request, reply) => {
    send(reply, new CtxflowError('not_found', `no route for ${request.method} on this path`));
  });
}
