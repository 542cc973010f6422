import type { TicketChange } from '@ctxflow/contracts';
import { z } from 'zod';
import { type Normalizer, parsePayload, scalar, show, toTicketUpdate } from './normalizer.ts';

/** Zendesk event-subscription types this feed carries: every ticket event. */
export const ZENDESK_TICKET_EVENT_PREFIX = 'zen:event-type:ticket.';

// Zendesk event webhooks (docs: "Webhook event types", "Ticket events"):
//   { type, account_id, id, time, zendesk_event_version, subject: "zen:ticket:<id>",
//     detail: { id, subject, status, priority, ... }, event: { ... per type ... } }
const payloadSchema = z.looseObject({
  type: z.string().min(1),
  account_id: z.number().int().nonnegative(),
  id: z.string().min(1).max(256),
  time: z.string().min(1),
  detail: z.looseObject({
    id: z.union([z.string().min(1), z.number().int().nonnegative()]),
    subject: z.string().optional(),
    description: z.string().nullable().optional(),
  }),
  event: z.record(z.string(), z.unknown()).optional(),
});

const commentEvent = z.looseObject({
  comment: z.looseObject({
    body: z.string(),
    is_public: z.boolean().optional(),
    author: z.looseObject({ name: z.string().optional() }).optional(),
  }),
});

/** A change Zendesk reports as plain `previous` / `current` values (status, priority, subject, ...). */
function isScalarChange(event: Record<string, unknown>): boolean {
  const plain = (value: unknown) => value === null || ['string', 'number', 'boolean'].includes(typeof value);
  return (
    ('current' in event || 'previous' in event) &&
    [event.current, event.previous].every((v) => v === undefined || plain(v))
  );
}

const KINDS: Record<string, string> = {
  created: 'created',
  comment_added: 'commented',
  status_changed: 'status',
  priority_changed: 'priority',
};

/**
 * Zendesk ticket events. Ticket the ticket id, scope the account id, event id
 * the event's own `id` (the same on every retry of that event).
 */
export const normalizeZendesk: Normalizer = ({ body, receivedAt }) => {
  const type = parsePayload(z.looseObject({ type: z.string().min(1) }), body, 'zendesk payload').type;
  if (!type.startsWith(ZENDESK_TICKET_EVENT_PREFIX)) return { ignored: `zendesk event ${type}` };
  const payload = parsePayload(payloadSchema, body, 'zendesk payload');
  const name = type.slice(ZENDESK_TICKET_EVENT_PREFIX.length);
  const ticket = String(payload.detail.id);
  const event = payload.event ?? {};
  let summary: string;
  let author: string | undefined;
  let changes: TicketChange[] | undefined;

  if (name === 'comment_added') {
    const { comment } = parsePayload(commentEvent, event, 'zendesk payload: event');
    author = comment.author?.name;
    const verb = comment.is_public === false ? 'added an internal note to' : 'commented on';
    summary = `${author ?? 'someone'} ${verb} ticket ${ticket}: ${comment.body}`;
  } else if (name === 'created') {
    const headline = `Ticket ${ticket} created: ${payload.detail.subject ?? ''}`.trimEnd();
    summary = payload.detail.description ? `${headline}\n\n${payload.detail.description}` : headline;
  } else if (name.endsWith('_changed') && isScalarChange(event)) {
    const field = name.slice(0, -'_changed'.length);
    const change = { field, from: scalar(event.previous), to: scalar(event.current) };
    changes = [change];
    summary = `Ticket ${ticket} ${field.replaceAll('_', ' ')} changed: ${show(change.from)} -> ${show(change.to)}`;
  } else {
    summary = `Ticket ${ticket}: ${name.replaceAll('_', ' ')}`;
  }

  return {
    update: toTicketUpdate({
      source: 'zendesk',
      ticket,
      scope: String(payload.account_id),
      eventId: payload.id,
      kind: KINDS[name] ?? name,
      summary,
      title: payload.detail.subject,
      author,
      occurredAt: payload.time,
      changes,
      receivedAt,
    }),
  };
};
