import { z } from 'zod';

/**
 * The built-in feeds, each with its own verifier and body format. Any other
 * source is configured (`CTXFLOW_FEED_SECRET_<NAME>`) and speaks the generic
 * feed's format under its own name.
 */
export const FEED_SOURCES = [
  'generic',
  'github',
  'incidentio',
  'jira',
  'servicenow',
  'zendesk',
  'cloudevents',
  'pagerduty',
  'linear',
  'gitlab',
] as const;
export type BuiltinFeedSource = (typeof FEED_SOURCES)[number];

/** A feed source's name: lowercase letters, digits and `-`, 1 to 32 characters. */
export const FEED_SOURCE_NAME = /^[a-z0-9-]{1,32}$/;
/** A feed source: a built-in one or a configured name (FEED_SOURCE_NAME). */
export type FeedSource = string;
export const feedSourceSchema = z
  .string()
  .regex(FEED_SOURCE_NAME, 'expected a feed source name: lowercase letters, digits and "-", 1 to 32 characters');

/** Whether `source` is one of the built-in feeds. */
export function isBuiltinFeedSource(source: string): source is BuiltinFeedSource {
  return (FEED_SOURCES as readonly string[]).includes(source);
}

/**
 * The tenant of a single-tenant deployment (no `CTXFLOW_API_KEYS`): every
 * caller is this tenant, and a TicketUpdate without `tenant` belongs to it.
 */
export const DEFAULT_TENANT = 'default';

/** One field that changed, from what to what (for coalesced notices). */
export const ticketChangeSchema = z.strictObject({
  field: z.string().min(1),
  from: z.string().nullable(),
  to: z.string().nullable(),
});

/**
 * The one normalized shape of a ticket update, whatever system sent it.
 * Published on TOPICS.ticketUpdates keyed by `${source}:${ticket}`.
 * `id` is unique per delivery of one tenant (`${source}:${eventId}`) so every
 * sink can drop a record it has already applied (sinks are per session, and a
 * session belongs to one tenant).
 */
export const ticketUpdateSchema = z.strictObject({
  id: z.string().min(1),
  /**
   * The tenant whose feed secret verified the delivery: only that tenant's
   * subscriptions match the update. Absent on records written before feeds
   * had tenants: read as DEFAULT_TENANT (see `updateTenant`).
   */
  tenant: z.string().min(1).max(256).optional(),
  /** The feed it came in on: a built-in one or a configured source name. */
  source: feedSourceSchema,
  /** The ticket key within its source: `owner/repo#12`, `PROJ-123`, `35436`, or any string for generic. */
  ticket: z.string().min(1).max(256),
  /** The container a wildcard subscription matches: `owner/repo`, `PROJ`, the Zendesk account; absent for generic. */
  scope: z.string().optional(),
  eventId: z.string().min(1).max(256),
  /** What happened: created, updated, commented, status, priority, ... */
  kind: z.string().min(1).max(64),
  summary: z.string().max(16_384),
  title: z.string().max(1024).optional(),
  url: z.string().max(2048).optional(),
  author: z.string().max(256).optional(),
  /** The sender's own ordering: a version number when it has one. */
  version: z.number().int().nonnegative().optional(),
  /** ISO-8601 time of the change at the sender. */
  occurredAt: z.string(),
  changes: z.array(ticketChangeSchema).optional(),
  /** ISO-8601 time ctxflow accepted the delivery. */
  receivedAt: z.string(),
});

export type TicketUpdate = z.infer<typeof ticketUpdateSchema>;

/**
 * The TicketUpdate as a consumer reads it off the topic: the same fields and
 * rules, but unknown fields (here and in `changes`) are accepted and kept, so
 * a producer can add an optional field without making its records poison.
 * Producers still write `ticketUpdateSchema` (strict).
 */
export const ticketUpdateRecordSchema = ticketUpdateSchema
  .extend({ changes: z.array(ticketChangeSchema.loose()).optional() })
  .loose();
export type TicketChange = z.infer<typeof ticketChangeSchema>;

export function ticketKey(update: Pick<TicketUpdate, 'source' | 'ticket'>): string {
  return `${update.source}:${update.ticket}`;
}

/** The tenant an update belongs to; a record without one is the single-tenant default's. */
export function updateTenant(update: Pick<TicketUpdate, 'tenant'>): string {
  return update.tenant ?? DEFAULT_TENANT;
}
