import { z } from 'zod';
import { CONTEXT_KINDS, ROW_SOURCES, ticketUpdateRefSchema } from './context-items.ts';

/**
 * The CloudEvent ctxflow publishes for every committed context row, on
 * TOPICS.contextRows, in the Kafka binary binding (CloudEvents Kafka protocol
 * binding 1.0, 3.2): the attributes in `ce_*` headers, `content-type:
 * application/json`, the data below as the record's value, the session id as
 * the record's key (the `partitionkey` extension). Published only when
 * CTXFLOW_CONTEXT_ROW_EVENTS is on.
 *
 *   ce_specversion: 1.0
 *   ce_id: <row id>                       unique: one event per committed row
 *   ce_source: /sessions/<session id>
 *   ce_type: dev.ctxflow.context-row.v1
 *   ce_subject: <session id>
 *   ce_time: <the row's commit time, RFC 3339>
 *   ce_ctxflowtenant: <tenant>
 *   ce_partitionkey: <session id>
 *   ce_datacontenttype: application/json
 */

/** `ce_type` of every context-row event. */
export const CONTEXT_ROW_EVENT_TYPE = 'dev.ctxflow.context-row.v1';

/** `ce_source` of the events of one session. */
export function contextRowEventSource(sessionId: string): string {
  return `/sessions/${sessionId}`;
}

/** The event's data: the row as committed, with where it was committed. */
export const contextRowEventDataSchema = z.strictObject({
  tenant: z.string().min(1).meta({ description: 'The tenant owning the session.' }),
  sessionId: z.string().min(1),
  stepId: z.string().min(1).meta({ description: 'The step whose context pass committed the row.' }),
  rowId: z.string().min(1).meta({ description: 'The row id; also the event id (`ce_id`).' }),
  seq: z.number().int().nonnegative().meta({ description: "The row's position in the session's log." }),
  kind: z.enum(CONTEXT_KINDS),
  source: z.enum(ROW_SOURCES),
  content: z.string().optional(),
  disable: z.array(z.string()).optional(),
  enable: z.array(z.string()).optional(),
  // Any JSON value (cursorSchema); typed loosely so the JSON Schema stays flat (no recursive definitions).
  cursor: z.unknown().optional().meta({
    description:
      "Hook rows: the feed position after the ticket updates the row carried (step-context's `{ v: 2, p: { <source>: <seq> } }`).",
  }),
  ticketUpdates: z.array(ticketUpdateRefSchema).optional().meta({
    description: 'Hook rows: the ticket updates the notice carried, in order (several when coalesced).',
  }),
  itemId: z
    .string()
    .optional()
    .meta({ description: 'The queued item the row delivered (absent for hook and memory rows).' }),
  at: z.string().meta({ description: 'When the row was committed (ISO 8601).' }),
});

export type ContextRowEventData = z.infer<typeof contextRowEventDataSchema>;

/** The binary binding's headers of a context-row event (other headers may be added and are kept). */
export const contextRowEventHeadersSchema = z.looseObject({
  'content-type': z.literal('application/json'),
  ce_specversion: z.literal('1.0'),
  ce_id: z.string().min(1),
  ce_source: z.string().regex(/^\/sessions\/.+$/),
  ce_type: z.literal(CONTEXT_ROW_EVENT_TYPE),
  ce_subject: z.string().min(1),
  ce_time: z.iso.datetime({ offset: true }),
  ce_ctxflowtenant: z.string().min(1),
  ce_partitionkey: z.string().min(1),
  ce_datacontenttype: z.literal('application/json'),
});
