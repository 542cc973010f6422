import { type TicketChange, type TicketUpdate, ticketChangeSchema } from '@ctxflow/contracts';
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

const occurredAtSchema = genericBodySchema.shape.occurredAt;
const changesSchema = genericBodySchema.shape.changes;

/** A string of `min` to `max` UTF-16 units (the schema counts code points: within these bounds it agrees). */
function fits(value: unknown, min: number, max: number): value is string {
  return typeof value === 'string' && value.length >= min && value.length <= max;
}

/**
 * The body as a TicketUpdate in one pass, or undefined when this pass is not
 * sure the schema path would give the same update: then that path decides.
 * It takes only what the schema accepts (strings measured in UTF-16 units,
 * never more than the schema's code points) and only bodies the schema path
 * would pass through unchanged: every field within the TicketUpdate's own
 * limits, which are the generic body's, so nothing is clipped or dropped and
 * the TicketUpdate check cannot fail. Keys in the schema's order, as the
 * schema path writes them.
 */
function parseGeneric(body: unknown, receivedAt: string): TicketUpdate | undefined {
  if (typeof body !== 'object' || body === null || Object.getPrototypeOf(body) !== Object.prototype) return undefined;
  const input = body as Record<string, unknown>;
  for (const key in input) {
    switch (key) {
      case 'eventId':
      case 'ticket':
      case 'summary':
      case 'kind':
      case 'title':
      case 'url':
      case 'author':
      case 'version':
      case 'occurredAt':
      case 'changes':
        continue;
      default:
        return undefined;
    }
  }
  const { eventId, ticket, summary, kind, title, url, author, version, occurredAt, changes } = input;
  if (!fits(eventId, 1, 256) || !fits(ticket, 1, 256) || !fits(summary, 0, 16_384)) return undefined;
  if (kind !== undefined && !fits(kind, 1, 64)) return undefined;
  if (title !== undefined && !fits(title, 0, 1024)) return undefined;
  if (url !== undefined && !fits(url, 0, 2048)) return undefined;
  if (author !== undefined && !fits(author, 0, 256)) return undefined;
  if (version !== undefined && !(typeof version === 'number' && Number.isSafeInteger(version) && version >= 0)) {
    return undefined;
  }
  if (occurredAt !== undefined && !(typeof occurredAt === 'string' && occurredAtSchema.safeParse(occurredAt).success)) {
    return undefined;
  }
  let changeList: TicketChange[] | undefined;
  if (changes !== undefined) {
    const parsed = changesSchema.safeParse(changes);
    if (!parsed.success) return undefined;
    changeList = parsed.data;
  }
  const update = {
    id: `generic:${eventId}`,
    source: 'generic',
    ticket,
    eventId,
    kind: (kind as string | undefined) ?? 'updated',
    summary,
  } as TicketUpdate;
  if (title !== undefined) update.title = title as string;
  if (url !== undefined) update.url = url as string;
  if (author !== undefined) update.author = author as string;
  if (version !== undefined) update.version = version as number;
  update.occurredAt = (occurredAt as string | undefined) ?? receivedAt;
  if (changeList !== undefined) update.changes = changeList;
  update.receivedAt = receivedAt;
  return update;
}

export const normalizeGeneric: Normalizer = ({ body, receivedAt }) => {
  const update = parseGeneric(body, receivedAt);
  if (update !== undefined) return { update };
  // Anything the one pass is not sure of: the schema names what is wrong, clips what is over-long.
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
