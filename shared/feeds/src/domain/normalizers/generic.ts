import { ticketChangeSchema } from '@ctxflow/contracts';
import { z } from 'zod';
import { type Normalizer, parsePayload, toTicketUpdate } from './normalizer.ts';

/**
 * The generic feed's body, as the public contract states it:
 *   { eventId, ticket, summary, kind?, title?, url?, version?, occurredAt? }
 * plus the optional `author` and `changes` of the TicketUpdate schema.
 * Unknown fields are refused, so a misspelt field is not silently dropped.
 */
export const genericBodySchema = z.strictObject({
  eventId: z.string().min(1).max(256),
  ticket: z.string().min(1).max(256),
  summary: z.string().max(16_384),
  kind: z.string().min(1).max(64).optional(),
  title: z.string().max(1024).optional(),
  url: z.string().max(2048).optional(),
  author: z.string().max(256).optional(),
  version: z.number().int().nonnegative().optional(),
  occurredAt: z.iso.datetime({ offset: true }).optional(),
  changes: z.array(ticketChangeSchema).max(100).optional(),
});

/** The body through its schema (which names what is wrong), then into the TicketUpdate (which clips what is over-long). */
export const normalizeGeneric: Normalizer = ({ body, receivedAt }) => {
  const input = parsePayload(genericBodySchema, body, 'body');
  return {
    update: toTicketUpdate({
      source: 'generic',
      ticket: input.ticket,
      eventId: input.eventId,
      kind: input.kind ?? 'updated',
      summary: input.summary,
      title: input.title,
      url: input.url,
      author: input.author,
      version: input.version,
      occurredAt: input.occurredAt ?? receivedAt,
      changes: input.changes,
      receivedAt,
    }),
  };
};
