import { z } from 'zod';

/**
 * Kafka topic names, versioned by their `.vN` suffix: a breaking change of a
 * record's shape gets a new topic name, never a new shape on the old one.
 * Keys: ticket updates by `${source}:${ticket}`, steps and context rows by session
 * id; a dead letter keeps its source record's key.
 */
export const TOPICS = {
  ticketUpdates: 'ctxflow.ticket-updates.v1',
  stepRequests: 'ctxflow.step-requests.v1',
  stepResults: 'ctxflow.step-results.v1',
  /** Ticket-update records step-context could not apply (see dead-letters.ts). */
  ticketUpdatesDlq: 'ctxflow.ticket-updates.dlq.v1',
  /** Step-request records session-runner could not run (see dead-letters.ts). */
  stepRequestsDlq: 'ctxflow.step-requests.dlq.v1',
  /** One CloudEvent per committed context row, when CTXFLOW_CONTEXT_ROW_EVENTS is on (context-row-event.ts). */
  contextRows: 'ctxflow.context-rows.v1',
} as const;

export type TopicName = (typeof TOPICS)[keyof typeof TOPICS];

/**
 * The header carrying a record's own id (a ticket update's `id`, a step
 * result's `requestId`): the producer's idempotence ends at a producer
 * restart, so every sink drops a record whose id it has already applied.
 */
export const RECORD_ID_HEADER = 'ctxflow-record-id';

/**
 * Headers every record may carry: `traceparent` (W3C trace context of the
 * span that produced it; consumers continue the trace) and the record id.
 * Other headers are allowed and kept.
 */
export const recordHeadersSchema = z.looseObject({
  traceparent: z
    .string()
    .regex(/^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/)
    .optional(),
  [RECORD_ID_HEADER]: z.string().min(1).optional(),
});
