import type { TicketChange } from '@ctxflow/contracts';
import { z } from 'zod';
import { standardWebhooksId } from '../verifiers/standard-webhooks.ts';
import { type Normalizer, parsePayload, show, toTicketUpdate } from './normalizer.ts';

/** incident.io webhook events (`event_type`) this feed carries; any other is acknowledged and ignored. */
export const INCIDENTIO_EVENTS = [
  'public_incident.incident_created_v2',
  'public_incident.incident_updated_v2',
  'public_incident.incident_status_updated_v2',
] as const;
type IncidentioEvent = (typeof INCIDENTIO_EVENTS)[number];

const named = z.looseObject({ name: z.string().max(1024) });

// The fields read from incident.io's IncidentV2 (API reference, "Webhooks":
// the envelope is `{ event_type, <event_type>: payload }`); every other field passes unread.
const incident = z.looseObject({
  id: z.string().min(1),
  /** Absent or empty: the event names no ticket (answered 202, nothing published). */
  reference: z.string().max(256).optional(),
  name: z.string(),
  summary: z.string().nullable().optional(),
  permalink: z.string().optional(),
  incident_status: named.optional(),
  severity: named.nullable().optional(),
  creator: z.looseObject({ user: named.optional() }).optional(),
  updated_at: z.string().min(1),
});
const statusUpdate = z.looseObject({ incident, new_status: named, previous_status: named });
const envelope = z.looseObject({ event_type: z.string().min(1) });

const KINDS: Record<IncidentioEvent, string> = {
  'public_incident.incident_created_v2': 'created',
  'public_incident.incident_updated_v2': 'updated',
  'public_incident.incident_status_updated_v2': 'status',
};

/** `(status Triage, severity Minor)`, or nothing when neither is known. */
function state(item: z.infer<typeof incident>): string {
  const parts = [];
  if (item.incident_status) parts.push(`status ${item.incident_status.name}`);
  if (item.severity) parts.push(`severity ${item.severity.name}`);
  return parts.length ? ` (${parts.join(', ')})` : '';
}

/**
 * incident.io incident events, public incidents only (a private incident's
 * events carry its id alone: no reference, nothing to say). Ticket the
 * incident's reference (`INC-123`), event id the verified `webhook-id` (the
 * same on every retry of the message), time the incident's `updated_at`.
 */
export const normalizeIncidentio: Normalizer = ({ headers, body, receivedAt }) => {
  const type = parsePayload(envelope, body, 'incident.io payload').event_type;
  if (!(INCIDENTIO_EVENTS as readonly string[]).includes(type)) return { ignored: `incident.io event ${type}` };
  const event = type as IncidentioEvent;
  // The envelope holds the payload under the event type's own name (an object: event_type parsed).
  const payload = Object.hasOwn(body as object, event) ? (body as Record<string, unknown>)[event] : undefined;
  let item: z.infer<typeof incident>;
  let changes: TicketChange[] | undefined;
  let headline: string;
  if (event === 'public_incident.incident_status_updated_v2') {
    const update = parsePayload(statusUpdate, payload, `incident.io payload: ${event}`);
    item = update.incident;
    const change = { field: 'status', from: update.previous_status.name, to: update.new_status.name };
    changes = [change];
    headline = `Incident ${item.reference} status changed: ${show(change.from)} -> ${show(change.to)}: ${item.name}`;
  } else {
    item = parsePayload(incident, payload, `incident.io payload: ${event}`);
    const verb = event === 'public_incident.incident_created_v2' ? 'created' : 'updated';
    headline = `Incident ${item.reference} ${verb}: ${item.name}${state(item)}`;
  }
  const ticket = item.reference;
  if (!ticket) return { ignored: `incident.io event ${event} names no incident reference` };
  const summary = item.summary ? `${headline}\n\n${item.summary}` : headline;
  const occurredAt = Number.isFinite(Date.parse(item.updated_at)) ? item.updated_at : receivedAt;
  return {
    update: toTicketUpdate({
      source: 'incidentio',
      ticket,
      eventId: standardWebhooksId(headers),
      kind: KINDS[event],
      summary,
      title: item.name,
      url: item.permalink,
      author: event === 'public_incident.incident_created_v2' ? item.creator?.user?.name : undefined,
      occurredAt,
      changes,
      receivedAt,
    }),
  };
};
