import { CtxflowError, type TicketUpdate, ticketUpdateSchema } from '@ctxflow/contracts';
import type { z } from 'zod';
import type { Headers } from '../verifiers/verifier.ts';

/** What a normalizer sees: a verified, JSON-parsed delivery. */
export interface FeedDelivery {
  headers: Headers;
  body: unknown;
  /** ISO-8601 time ctxflow accepted the delivery. */
  receivedAt: string;
}

/** A delivery is either one ticket update or an event this feed does not carry. */
export type NormalizeOutcome = { update: TicketUpdate } | { ignored: string };

/** Turns one sender's payload into a TicketUpdate; throws `validation_error` naming what is wrong. */
export type Normalizer = (delivery: FeedDelivery) => NormalizeOutcome;

/** Limits of the TicketUpdate schema, in characters. */
const MAX_SUMMARY = 16_384;
const MAX_TITLE = 1024;
const MAX_URL = 2048;

/** Parses a payload with a zod schema; the refusal names the first bad path and lists all. */
export function parsePayload<S extends z.ZodType>(schema: S, body: unknown, what: string): z.infer<S> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((issue) => ({
    path: issue.path.map((part) => (typeof part === 'number' ? part : String(part))),
    message: issue.message,
  }));
  const first = issues[0];
  const where = first?.path.length ? first.path.join('.') : 'body';
  throw new CtxflowError('validation_error', `${what}: ${where}: ${first?.message ?? 'invalid'}`, { details: issues });
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * Builds the normalized update: `id` is `${source}:${eventId}`; over-long
 * summary and title are cut with an ellipsis, an over-long url is dropped.
 * The result is checked against the shared schema.
 */
export function toTicketUpdate(fields: Omit<TicketUpdate, 'id'>): TicketUpdate {
  const update: TicketUpdate = { id: `${fields.source}:${fields.eventId}`, ...fields };
  update.summary = clip(update.summary, MAX_SUMMARY);
  if (update.title !== undefined) update.title = clip(update.title, MAX_TITLE);
  if (update.url !== undefined && update.url.length > MAX_URL) delete update.url;
  for (const key of Object.keys(update) as (keyof TicketUpdate)[]) {
    if (update[key] === undefined) delete update[key];
  }
  return parsePayload(ticketUpdateSchema, update, 'ticket update');
}

/** A value shown in a change line: strings quoted, null as `none`. */
export function show(value: string | null): string {
  return value === null ? 'none' : JSON.stringify(value);
}

/** A scalar from a sender's change record, as TicketChange wants it. */
export function scalar(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return null;
}
