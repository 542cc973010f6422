import type { IncomingRecord } from '@ctxflow/bus';
import {
  CLOUDEVENT_TENANT_ATTRIBUTE,
  type CloudEventLike,
  isCtxflowError,
  REQUIRED_CLOUDEVENT_ATTRIBUTES,
  requireCloudEventAttributes,
  type TicketUpdate,
  ticketUpdateFromCloudEvent,
  ticketUpdateRecordSchema,
  ticketUpdateSchema,
  validateCloudEvent,
} from '@ctxflow/contracts';
import { Kafka, type KafkaMessage } from 'cloudevents';

/** What a record of the ticket-updates topic is: its update, or why it is poison. */
export type ParsedRecord =
  | { update: TicketUpdate; format: 'ticket-update' | 'cloudevents-binary' | 'cloudevents-structured' }
  | { problem: 'not JSON' | 'not a valid TicketUpdate' | 'not a valid CloudEvent'; issues: string[] };

/** Longest `ctxflowtenant` (the TicketUpdate's tenant limit). */
const MAX_TENANT = 256;

function invalidEvent(err: unknown): ParsedRecord {
  if (isCtxflowError(err)) return { problem: 'not a valid CloudEvent', issues: [err.message] };
  const message = err instanceof Error ? err.message.split('\n')[0]! : String(err);
  return { problem: 'not a valid CloudEvent', issues: [message] };
}

/** The tenant of an event read off the topic: its `ctxflowtenant` extension, else the default (absent). */
function eventTenant(event: CloudEventLike): string | undefined {
  const tenant = event[CLOUDEVENT_TENANT_ATTRIBUTE];
  if (tenant === undefined) return undefined;
  if (typeof tenant !== 'string' || tenant === '' || tenant.length > MAX_TENANT) {
    throw new Error(`${CLOUDEVENT_TENANT_ATTRIBUTE}: expected a tenant name of 1 to ${MAX_TENANT} characters`);
  }
  return tenant;
}

/**
 * A record of CloudEvents' Kafka protocol binding, through the SDK's
 * `Kafka.toEvent`: binary mode (attributes in `ce_*` headers, the JSON data
 * as the value, `content-type: application/json`) or structured mode
 * (`content-type: application/cloudevents+json`, the event as the value).
 */
function fromCloudEvent(record: IncomingRecord, structured: boolean, receivedAt: string): ParsedRecord {
  try {
    let value = record.value;
    let hasTime: boolean;
    if (structured) {
      let attributes: unknown;
      try {
        attributes = JSON.parse(record.value);
      } catch (err) {
        return { problem: 'not JSON', issues: [(err as Error).message] };
      }
      if (typeof attributes !== 'object' || attributes === null || Array.isArray(attributes)) {
        return { problem: 'not a valid CloudEvent', issues: ['value: expected a JSON object'] };
      }
      const event = attributes as Record<string, unknown>;
      requireCloudEventAttributes(event);
      hasTime = event.time !== undefined;
      // The SDK's structured reader cannot read an event without `time` (optional in CloudEvents): give it one.
      if (!hasTime) value = JSON.stringify({ ...event, time: receivedAt });
    } else {
      const attributes: Record<string, unknown> = {};
      for (const name of [...REQUIRED_CLOUDEVENT_ATTRIBUTES, 'time']) attributes[name] = record.headers[`ce_${name}`];
      requireCloudEventAttributes(attributes);
      hasTime = record.headers.ce_time !== undefined;
    }
    const message: KafkaMessage<string> = { headers: record.headers, key: record.key, value, body: value };
    const parsed = Kafka.toEvent(message);
    if (Array.isArray(parsed)) {
      return { problem: 'not a valid CloudEvent', issues: ['batch mode is not read on the topic: one event a record'] };
    }
    const event = parsed as unknown as CloudEventLike;
    validateCloudEvent(event);
    const update = ticketUpdateFromCloudEvent(event, { tenant: eventTenant(event), receivedAt, hasTime });
    return { update, format: structured ? 'cloudevents-structured' : 'cloudevents-binary' };
  } catch (err) {
    return invalidEvent(err);
  }
}

/**
 * Reads one record of the ticket-updates topic, whatever wrote it: a
 * TicketUpdate (the feed-ingestor's, or any producer's), or a CloudEvent in
 * the Kafka binding's binary or structured mode, mapped onto the same
 * TicketUpdate (docs/cloudevents.md). A tolerant reader: a TicketUpdate with
 * fields this version does not know is read, and keeps them.
 * `receivedAt` is the time of reading (a CloudEvent has no ctxflow one).
 */
export function parseTicketUpdateRecord(record: IncomingRecord, receivedAt: string): ParsedRecord {
  const message = { headers: record.headers, key: record.key, value: record.value, body: record.value };
  if (Kafka.isEvent(message)) {
    const contentType = record.headers['content-type']?.toLowerCase() ?? '';
    return fromCloudEvent(record, contentType.startsWith('application/cloudevents'), receivedAt);
  }
  let value: unknown;
  try {
    value = JSON.parse(record.value);
  } catch (err) {
    return { problem: 'not JSON', issues: [(err as Error).message] };
  }
  // The strict schema first: zod checks it about twice as fast as the loose one, and it fits nearly every record.
  const strict = ticketUpdateSchema.safeParse(value);
  if (strict.success) return { update: strict.data, format: 'ticket-update' };
  const parsed = ticketUpdateRecordSchema.safeParse(value);
  if (!parsed.success) {
    return {
      problem: 'not a valid TicketUpdate',
      issues: parsed.error.issues.map((i) => `${i.path.join('.') || 'record'}: ${i.message}`),
    };
  }
  return { update: parsed.data as TicketUpdate, format: 'ticket-update' };
}
