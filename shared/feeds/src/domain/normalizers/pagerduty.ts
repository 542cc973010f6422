import { z } from 'zod';
import { headerId } from './fields.ts';
import { type Normalizer, parsePayload, toTicketUpdate } from './normalizer.ts';

/** PagerDuty v3 event types this feed carries; besides them, every `incident.workflow.*` event. */
export const PAGERDUTY_EVENTS = [
  'incident.triggered',
  'incident.acknowledged',
  'incident.unacknowledged',
  'incident.resolved',
  'incident.reopened',
  'incident.reassigned',
  'incident.escalated',
  'incident.delegated',
  'incident.priority_updated',
  'incident.annotated',
  'incident.responder.added',
  'incident.responder.replied',
  'incident.status_update_published',
] as const;
export const PAGERDUTY_WORKFLOW_PREFIX = 'incident.workflow.';

/** A PagerDuty object id (`PGR0VU2`). */
const id = z.string().regex(/^[A-Za-z0-9]{1,64}$/, 'expected a PagerDuty id');
const reference = z.looseObject({ summary: z.string().optional(), html_url: z.string().nullable().optional() });
const incidentReference = reference.extend({ id });

// The v3 webhook envelope (docs: "V3 Webhooks", "Webhook Payload"):
//   { event: { id, event_type, resource_type, occurred_at, agent, client, data } }
const envelope = z.looseObject({
  event: z.looseObject({
    id: z.string().min(1).max(256),
    event_type: z.string().min(1),
    occurred_at: z.string().min(1),
    agent: reference.nullable().optional(),
    data: z.record(z.string(), z.unknown()),
  }),
});

// `data` of the incident.* events about the incident itself (data.type `incident`).
const incident = z.looseObject({
  id,
  title: z.string().optional(),
  number: z.number().int().optional(),
  html_url: z.string().optional(),
  status: z.string().optional(),
  urgency: z.string().optional(),
  service: reference.nullable().optional(),
  priority: reference.nullable().optional(),
  escalation_policy: reference.nullable().optional(),
  assignees: z.array(reference).optional(),
});

// `data` of the events about a part of an incident: incident_note, incident_responder,
// incident_status_update, incident_workflow_instance; each names its incident.
const part = z.looseObject({
  incident: incidentReference,
  content: z.string().optional(),
  message: z.string().optional(),
  state: z.string().optional(),
  user: reference.nullable().optional(),
  incident_workflow: reference.nullable().optional(),
  summary: z.string().optional(),
});

/** The kind of each event (the event type's last part, but `created` and `commented` as the other feeds say). */
function kindOf(eventType: string): string {
  if (eventType === 'incident.triggered') return 'created';
  if (eventType === 'incident.annotated') return 'commented';
  return eventType.slice('incident.'.length).replaceAll('.', '_');
}

const INCIDENT_VERBS: Record<string, string> = {
  'incident.triggered': 'triggered',
  'incident.acknowledged': 'acknowledged',
  'incident.unacknowledged': 'unacknowledged',
  'incident.resolved': 'resolved',
  'incident.reopened': 'reopened',
  'incident.reassigned': 'reassigned',
  'incident.escalated': 'escalated',
  'incident.delegated': 'delegated',
  'incident.priority_updated': 'changed the priority of',
};

/**
 * PagerDuty v3 webhooks. Ticket the incident id (`event.data.id` for events
 * about the incident, `event.data.incident.id` for its notes, responders,
 * status updates and workflows), event id the `X-Webhook-Id` header (the same
 * on every retry) when present, else `event.id`. No version: updates of one
 * incident are ordered by `occurred_at`. Events about no incident (services)
 * are ignored.
 */
export const normalizePagerduty: Normalizer = ({ headers, body, receivedAt }) => {
  const { event } = parsePayload(envelope, body, 'pagerduty payload');
  const type = event.event_type;
  const taken = (PAGERDUTY_EVENTS as readonly string[]).includes(type) || type.startsWith(PAGERDUTY_WORKFLOW_PREFIX);
  if (!taken) return { ignored: `pagerduty event ${type}` };
  const agent = event.agent?.summary;
  const base = {
    source: 'pagerduty' as const,
    eventId: headerId(headers, 'x-webhook-id') ?? event.id,
    kind: kindOf(type),
    author: agent,
    occurredAt: event.occurred_at,
    receivedAt,
  };

  if (Object.hasOwn(INCIDENT_VERBS, type)) {
    const data = parsePayload(incident, event.data, 'pagerduty payload: event.data');
    const name = data.number === undefined ? `incident ${data.id}` : `incident #${data.number} ${data.id}`;
    const lines = [`${agent ?? 'PagerDuty'} ${INCIDENT_VERBS[type]} ${name}: ${data.title ?? ''}`.trimEnd()];
    const detail = (label: string, value: string | undefined | null) => {
      if (value) lines.push(`${label}: ${value}`);
    };
    detail('status', data.status);
    detail('urgency', data.urgency);
    detail('priority', data.priority?.summary);
    detail('service', data.service?.summary);
    detail('escalation policy', data.escalation_policy?.summary);
    detail(
      'assignees',
      data.assignees
        ?.map((a) => a.summary ?? '')
        .filter(Boolean)
        .join(', '),
    );
    return {
      update: toTicketUpdate({
        ...base,
        ticket: data.id,
        summary: lines.join('\n'),
        title: data.title,
        url: data.html_url,
      }),
    };
  }

  const data = parsePayload(part, event.data, 'pagerduty payload: event.data');
  const ticket = data.incident.id;
  const on = `incident ${ticket}`;
  const who = agent ?? 'PagerDuty';
  let summary: string;
  if (type === 'incident.annotated') {
    summary = `${who} added a note to ${on}: ${data.content ?? ''}`;
  } else if (type === 'incident.status_update_published') {
    summary = `${who} published a status update on ${on}: ${data.message ?? ''}`;
  } else if (type === 'incident.responder.added') {
    const responder = data.user?.summary ?? 'a responder';
    summary = `${who} asked ${responder} to respond to ${on}: ${data.message ?? ''}`;
  } else if (type === 'incident.responder.replied') {
    const responder = data.user?.summary ?? 'a responder';
    summary = `${responder} replied to the request to respond to ${on}: ${data.state ?? ''}`;
  } else {
    const workflow = data.incident_workflow?.summary ?? data.summary ?? 'a workflow';
    summary = `Workflow ${workflow} ${type.slice(PAGERDUTY_WORKFLOW_PREFIX.length)} on ${on}`;
  }
  return {
    update: toTicketUpdate({
      ...base,
      ticket,
      summary: summary.trimEnd(),
      title: data.incident.summary,
      url: data.incident.html_url ?? undefined,
    }),
  };
};
