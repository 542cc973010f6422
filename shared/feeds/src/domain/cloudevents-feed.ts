import {
  type CloudEventLike,
  CtxflowError,
  REQUIRED_CLOUDEVENT_ATTRIBUTES,
  requireCloudEventAttributes,
  type TicketUpdate,
  ticketUpdateFromCloudEvent,
  validateCloudEvent,
} from '@ctxflow/contracts';
import { HTTP } from 'cloudevents';
import type { Headers } from './verifiers/verifier.ts';

/** Structured mode's media type: the body is one event. */
export const CE_STRUCTURED = 'application/cloudevents+json';
/** Batch mode's media type: the body is a JSON array of events. */
export const CE_BATCH = 'application/cloudevents-batch+json';
/** The media types of `POST /feeds/cloudevents` (binary mode's data is `application/json`). */
export const CLOUDEVENTS_MEDIA_TYPES = ['application/json', CE_STRUCTURED, CE_BATCH] as const;
/** Most events in one batch request; more is 400 `validation_error`. */
export const MAX_BATCH_EVENTS = 100;

export type CloudEventsMode = 'structured' | 'binary' | 'batch';

/** A request's media type (lower case, parameters off) and whether its charset, if any, is UTF-8. */
export function mediaTypeOf(headers: Headers): { type: string; utf8: boolean } {
  const raw = headers['content-type'];
  const value = (Array.isArray(raw) ? raw[0] : raw) ?? '';
  const [type = '', ...params] = value.split(';').map((part) => part.trim().toLowerCase());
  const charset = params.find((p) => p.startsWith('charset='))?.slice('charset='.length);
  return { type, utf8: charset === undefined || charset === 'utf-8' || charset === 'utf8' };
}

function parseJson(rawBody: Buffer): unknown {
  if (rawBody.length === 0) throw new CtxflowError('validation_error', 'body: empty, expected a CloudEvent');
  try {
    return JSON.parse(rawBody.toString('utf8'));
  } catch {
    throw new CtxflowError('validation_error', 'body: not valid JSON (truncated or malformed)');
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The SDK's messages that go on to quote the sender's text (a name, a value, a content type). */
const SDK_QUOTING = [
  'invalid extension name',
  'invalid extension value',
  'invalid attribute name',
  'invalid content type',
  'Unsupported event encoding',
];

/** The SDK's refusal of an event, without the sender's text it quotes. */
function sdkProblem(err: unknown): string {
  const line = (err instanceof Error ? err.message : '').split('\n')[0] ?? '';
  return SDK_QUOTING.find((start) => line.startsWith(start)) ?? (line || 'not a valid CloudEvent');
}

/** The SDK's event of one structured event (already JSON-parsed), validated. */
function structuredEvent(attributes: unknown, where: string): CloudEventLike {
  if (!isObject(attributes)) throw new CtxflowError('validation_error', `${where || 'body: '}expected a JSON object`);
  requireCloudEventAttributes(attributes, where);
  let event: CloudEventLike;
  try {
    event = HTTP.toEvent({ headers: { 'content-type': CE_STRUCTURED }, body: attributes }) as CloudEventLike;
  } catch (err) {
    throw new CtxflowError('validation_error', `${where}event: ${sdkProblem(err)}`);
  }
  validateCloudEvent(event, where);
  return event;
}

/** The SDK's event of a binary-mode request: attributes in `ce-*` headers, the data in the body. */
function binaryEvent(headers: Headers, rawBody: Buffer, type: string): CloudEventLike {
  const attributes: Record<string, unknown> = {};
  for (const name of [...REQUIRED_CLOUDEVENT_ATTRIBUTES, 'time']) attributes[name] = headers[`ce-${name}`];
  requireCloudEventAttributes(attributes);
  if (type !== 'application/json') {
    throw new CtxflowError('validation_error', 'datacontenttype: expected application/json (the content-type)');
  }
  const ceHeaders: Record<string, string | string[] | undefined> = { 'content-type': type };
  for (const [name, value] of Object.entries(headers)) if (name.startsWith('ce-')) ceHeaders[name] = value;
  let event: CloudEventLike;
  try {
    event = HTTP.toEvent({ headers: ceHeaders, body: rawBody.toString('utf8') }) as CloudEventLike;
  } catch (err) {
    if (err instanceof SyntaxError) throw new CtxflowError('validation_error', 'data: not valid JSON');
    throw new CtxflowError('validation_error', `event: ${sdkProblem(err)}`);
  }
  validateCloudEvent(event);
  return event;
}

/**
 * The ticket updates of one verified `POST /feeds/cloudevents` request, in
 * event order, by mode (the content-type): structured
 * (`application/cloudevents+json`), batch (`application/cloudevents-batch+json`,
 * 1 to MAX_BATCH_EVENTS events) or else binary (`ce-*` headers, JSON data).
 * All or nothing: the first invalid event refuses the whole request with a
 * `validation_error` naming it (`events[i].`) and its attribute.
 */
export function cloudEventUpdates(
  headers: Headers,
  rawBody: Buffer,
  context: { tenant: string; receivedAt: string },
): { mode: CloudEventsMode; updates: TicketUpdate[] } {
  const { type, utf8 } = mediaTypeOf(headers);
  if (!utf8) throw new CtxflowError('validation_error', 'content-type: charset must be utf-8');
  const toUpdate = (event: CloudEventLike, hasTime: boolean, where = '') =>
    ticketUpdateFromCloudEvent(event, { tenant: context.tenant, receivedAt: context.receivedAt, hasTime }, where);
  if (type === CE_BATCH) {
    const body = parseJson(rawBody);
    if (!Array.isArray(body)) throw new CtxflowError('validation_error', 'body: expected a JSON array of events');
    if (body.length === 0) throw new CtxflowError('validation_error', 'body: the batch has no events');
    if (body.length > MAX_BATCH_EVENTS) {
      throw new CtxflowError('validation_error', `body: more than ${MAX_BATCH_EVENTS} events in one batch`);
    }
    const updates = body.map((attributes, i) => {
      const where = `events[${i}].`;
      const event = structuredEvent(attributes, where);
      return toUpdate(event, isObject(attributes) && attributes.time !== undefined, where);
    });
    return { mode: 'batch', updates };
  }
  if (type === CE_STRUCTURED) {
    const body = parseJson(rawBody);
    const event = structuredEvent(body, '');
    return { mode: 'structured', updates: [toUpdate(event, isObject(body) && body.time !== undefined)] };
  }
  const event = binaryEvent(headers, rawBody, type);
  return { mode: 'binary', updates: [toUpdate(event, headers['ce-time'] !== undefined)] };
}
