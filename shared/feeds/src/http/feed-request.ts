/**
 * Reading a feed request: Fastify's own refusals as public codes, the media
 * types a route takes, the route's source, the JSON body.
 */
import { CLOUDEVENTS_SOURCE, CtxflowError } from '@ctxflow/contracts';
import type { FastifyError, FastifyRequest } from 'fastify';
import { CE_BATCH, CE_STRUCTURED, CLOUDEVENTS_MEDIA_TYPES, mediaTypeOf } from '../domain/cloudevents-feed.ts';

/** Whether a request came as CloudEvents structured or batch mode (only the cloudevents feed takes those). */
export function mediaTypeIsCloudEvents(request: FastifyRequest): boolean {
  const type = mediaTypeOf(request.headers).type;
  return type === CE_STRUCTURED || type === CE_BATCH;
}

/** Fastify's own refusals in this scope, mapped to public codes. */
export function fromFastify(
  err: FastifyError,
  maxBodyBytes: number,
  source: string | undefined,
): CtxflowError | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new CtxflowError('payload_too_large', `body is over the ${maxBodyBytes}-byte limit`);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new CtxflowError('validation_error', `content-type: expected ${expectedMediaTypes(source)}`);
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new CtxflowError('validation_error', 'content-length does not match the body');
  }
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
    return new CtxflowError('validation_error', err.message);
  }
  return undefined;
}

/** The media types a feed's route takes, for a refusal's message. */
export function expectedMediaTypes(source: string | undefined): string {
  return source === CLOUDEVENTS_SOURCE ? CLOUDEVENTS_MEDIA_TYPES.join(', ') : 'application/json';
}

/** The source of a feed route (its route config), for the refusal counter. */
export function routeSource(request: FastifyRequest): string | undefined {
  return (request.routeOptions.config as { source?: string } | undefined)?.source;
}

/** The body as JSON: an empty or malformed body is a `validation_error` that quotes none of it. */
export function parseJson(rawBody: Buffer): unknown {
  if (rawBody.length === 0) throw new CtxflowError('validation_error', 'body: empty, expected a JSON object');
  try {
    return JSON.parse(rawBody.toString('utf8'));
  } catch {
    // The parser's message quotes the body; the answer names the problem only.
    throw new CtxflowError('validation_error', 'body: not valid JSON (truncated or malformed)');
  }
}
