import { z } from 'zod';
import { CtxflowError } from './errors.ts';
import { type TicketUpdate, ticketChangeSchema, ticketUpdateSchema } from './ticket-update.ts';

/**
 * CloudEvents 1.0 as a ticket update (docs/cloudevents.md). The transports
 * (HTTP `POST /feeds/cloudevents`, the Kafka binding on the ticket-updates
 * topic) parse and validate with the `cloudevents` SDK; this module holds
 * what both then do the same way: the required attributes, the SDK's
 * validation errors named by attribute, and the mapping onto a TicketUpdate.
 */

/** The feed source of every update made of a CloudEvent. */
export const CLOUDEVENTS_SOURCE = 'cloudevents';
/** Accepted event types: `dev.ctxflow.ticket.<kind>`; the kind is the TicketUpdate's. */
export const CLOUDEVENT_TYPE_PREFIX = 'dev.ctxflow.ticket.';
const TYPE_PATTERN = /^dev\.ctxflow\.ticket\.([a-z][a-z0-9_-]{0,63})$/;
/** The extension attribute naming the tenant of an event read off Kafka (`ce_ctxflowtenant`). */
export const CLOUDEVENT_TENANT_ATTRIBUTE = 'ctxflowtenant';
/** Attributes an event must carry itself (the SDK would make up an id and a specversion). */
export const REQUIRED_CLOUDEVENT_ATTRIBUTES = ['specversion', 'id', 'source', 'type'] as const;
/** Longest `source` and `subject` (the subscription's scope and ticket limits). */
const MAX_ATTRIBUTE = 256;

/** An event as the SDK gives it: its attributes, its data and its own validation. */
export interface CloudEventLike {
  id: string;
  source: string;
  type: string;
  specversion: string;
  subject?: string;
  time?: string;
  data?: unknown;
  validate(): boolean;
  [extension: string]: unknown;
}

/** `validation_error` naming where (`events[2].`, for one event of a batch) and which attribute. */
function refuse(where: string, attribute: string, message: string): CtxflowError {
  return new CtxflowError('validation_error', `${where}${attribute}: ${message}`);
}

/**
 * Refuses an event whose wire attributes (the structured JSON object, or the
 * binary mode's headers with the prefix taken off) lack a required attribute,
 * are not CloudEvents 1.0, or carry a `time` that is not RFC 3339. Runs before the SDK, which fills in a missing
 * `id` and `specversion`.
 */
export function requireCloudEventAttributes(attributes: Readonly<Record<string, unknown>>, where = ''): void {
  for (const name of REQUIRED_CLOUDEVENT_ATTRIBUTES) {
    const value = attributes[name];
    if (typeof value !== 'string' || value === '') throw refuse(where, name, 'required (a non-empty string)');
  }
  if (attributes.specversion !== '1.0') throw refuse(where, 'specversion', 'expected "1.0"');
  // The SDK reads a time it cannot parse as "now": refused here instead.
  if (attributes.time !== undefined && !timeSchema.safeParse(attributes.time).success) {
    throw refuse(where, 'time', 'expected an RFC 3339 timestamp (e.g. 2024-05-01T09:30:00Z)');
  }
}

const timeSchema = z.iso.datetime({ offset: true });

/** The attributes the CloudEvents 1.0 specification defines. */
const SPEC_ATTRIBUTES = [
  ...REQUIRED_CLOUDEVENT_ATTRIBUTES,
  'datacontenttype',
  'dataschema',
  'subject',
  'time',
  'data',
  'data_base64',
] as const;

interface SdkValidationIssue {
  instancePath?: string;
  message?: string;
  params?: { missingProperty?: string };
}

/**
 * Runs the SDK's validation of `event` (the CloudEvents 1.0 JSON schema) and
 * turns its error into a `validation_error` naming the attribute.
 */
export function validateCloudEvent(event: CloudEventLike, where = ''): void {
  try {
    if (event.validate()) return;
  } catch (err) {
    const issues = (err as { errors?: unknown[] }).errors ?? [];
    const first = issues.find((i): i is SdkValidationIssue => typeof i === 'object' && i !== null);
    const attribute = first?.params?.missingProperty ?? first?.instancePath?.replace(/^\//, '').split('/')[0] ?? '';
    // An extension's name is the sender's text: the refusal names only the specification's attributes.
    const named = (SPEC_ATTRIBUTES as readonly string[]).includes(attribute) ? attribute : 'event';
    throw refuse(where, named, first?.message ?? 'not a valid CloudEvent');
  }
  throw refuse(where, 'specversion', 'expected "1.0"');
}

/** The event's `data`: what a ticket update needs of it. Unknown fields are ignored. */
export const cloudEventDataSchema = z
  .looseObject({
    summary: z.string().max(16_384).optional(),
    title: z.string().max(1024).optional(),
    url: z.string().max(2048).optional(),
    author: z.string().max(256).optional(),
    version: z.number().int().nonnegative().optional(),
    changes: z.array(ticketChangeSchema.loose()).max(100).optional(),
  })
  .refine((data) => data.summary !== undefined || data.title !== undefined, {
    message: 'needs summary or title',
    path: ['summary'],
  });

export interface CloudEventContext {
  /** The tenant: the signing secret's (HTTP) or the `ctxflowtenant` extension's (Kafka); absent: the default. */
  tenant?: string;
  /** ISO-8601 time ctxflow accepted the event. */
  receivedAt: string;
  /** Whether the event carried `time` itself (the SDK makes one up): else `occurredAt` is `receivedAt`. */
  hasTime: boolean;
}

/**
 * The TicketUpdate of a validated event:
 * - `type` `dev.ctxflow.ticket.<kind>` gives `kind`; any other type is refused;
 * - `subject` is the ticket (required), `source` the ticket system (the scope a
 *   wildcard subscription names), `id` the event id;
 * - the update id, which dedupes per tenant, is `cloudevents:<source>:<id>`
 *   (CloudEvents makes `source` + `id` unique);
 * - `time` is `occurredAt`; `data` gives summary (or title), title, url, author,
 *   version and changes.
 */
export function ticketUpdateFromCloudEvent(
  event: CloudEventLike,
  context: CloudEventContext,
  where = '',
): TicketUpdate {
  const type = TYPE_PATTERN.exec(event.type);
  if (!type) {
    throw refuse(
      where,
      'type',
      `not accepted (expected ${CLOUDEVENT_TYPE_PREFIX}<kind>, e.g. ${CLOUDEVENT_TYPE_PREFIX}updated)`,
    );
  }
  if (typeof event.subject !== 'string' || event.subject === '') {
    throw refuse(where, 'subject', 'required: the ticket the event is about');
  }
  if (event.subject.length > MAX_ATTRIBUTE) throw refuse(where, 'subject', `longer than ${MAX_ATTRIBUTE} characters`);
  if (event.source.length > MAX_ATTRIBUTE) throw refuse(where, 'source', `longer than ${MAX_ATTRIBUTE} characters`);
  if (event.id.length > MAX_ATTRIBUTE) throw refuse(where, 'id', `longer than ${MAX_ATTRIBUTE} characters`);
  if (typeof event.data !== 'object' || event.data === null || Array.isArray(event.data)) {
    throw refuse(where, 'data', 'expected a JSON object (datacontenttype application/json)');
  }
  const parsed = cloudEventDataSchema.safeParse(event.data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw refuse(where, ['data', ...(issue?.path ?? []).map(String)].join('.'), issue?.message ?? 'invalid');
  }
  const data = parsed.data;
  const occurredAt = context.hasTime && event.time ? new Date(event.time).toISOString() : context.receivedAt;
  const update: TicketUpdate = {
    id: `${CLOUDEVENTS_SOURCE}:${event.source}:${event.id}`,
    source: CLOUDEVENTS_SOURCE,
    ticket: event.subject,
    scope: event.source,
    eventId: event.id,
    kind: type[1]!,
    summary: data.summary ?? data.title ?? '',
    occurredAt,
    receivedAt: context.receivedAt,
  };
  if (context.tenant !== undefined) update.tenant = context.tenant;
  if (data.title !== undefined) update.title = data.title;
  if (data.url !== undefined) update.url = data.url;
  if (data.author !== undefined) update.author = data.author;
  if (data.version !== undefined) update.version = data.version;
  if (data.changes !== undefined) {
    update.changes = data.changes.map(({ field, from, to }) => ({ field, from, to }));
  }
  const checked = ticketUpdateSchema.safeParse(update);
  if (!checked.success) {
    const issue = checked.error.issues[0];
    throw refuse(where, 'event', `${issue?.path.join('.')}: ${issue?.message}`);
  }
  return checked.data;
}
