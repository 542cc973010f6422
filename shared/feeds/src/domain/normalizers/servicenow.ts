import { CtxflowError, type TicketChange } from '@ctxflow/contracts';
import { z } from 'zod';
import { standardWebhooksId } from '../verifiers/standard-webhooks.ts';
import { type Normalizer, parsePayload, toTicketUpdate } from './normalizer.ts';

/**
 * A Table API field: its value as a string (`sysparm_display_value=false`, the
 * default), or `{ display_value, value }` (`sysparm_display_value=all`), read
 * as the display value.
 */
const field = z.union([
  z.string(),
  z.looseObject({ display_value: z.string().nullable().optional(), value: z.string().nullable().optional() }),
]);
type Field = z.infer<typeof field>;

/** A field's text: the display value when both are there, '' when neither. */
function text(value: Field | undefined): string {
  if (value === undefined) return '';
  if (typeof value === 'string') return value;
  return value.display_value ?? value.value ?? '';
}

/** The raw value (for numbers and times): `value` when both are there. */
function raw(value: Field | undefined): string {
  if (value === undefined) return '';
  if (typeof value === 'string') return value;
  return value.value ?? value.display_value ?? '';
}

// A ServiceNow Table API record (docs: "Table API", GET /api/now/table/{tableName}/{sys_id})
// as the Business Rule in docs/servicenow.md sends it; every other field passes unread.
const recordSchema = z.looseObject({
  sys_id: field,
  number: field.optional(),
  short_description: field.optional(),
  state: field.optional(),
  priority: field.optional(),
  sys_updated_on: field.optional(),
  sys_updated_by: field.optional(),
  sys_mod_count: z.union([z.number().int().nonnegative(), field]),
  sys_class_name: field.optional(),
  comments: field.optional(),
  work_notes: field.optional(),
});

/** `sys_updated_on` (`2024-05-01 09:30:00`, UTC in the Table API's value form) as ISO-8601, or undefined. */
export function servicenowTime(value: string): string | undefined {
  const match = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:Z)?$/.exec(value.trim());
  if (!match) return undefined;
  const iso = `${match[1]}T${match[2]}Z`;
  return Number.isFinite(Date.parse(iso)) ? iso : undefined;
}

/**
 * ServiceNow records (incident, task and any table extending task) sent on
 * insert and update by the Business Rule of docs/servicenow.md. Ticket the
 * record's `number` (`INC0010001`; a record without one names no ticket and
 * is ignored), scope its table (`sys_class_name`), version `sys_mod_count`
 * (an older one than the ticket's newest is dropped), event id the verified
 * `webhook-id` (the rule sends `<sys_id>.<sys_mod_count>`, the same on every
 * retry). A comment or work note added in the update is a change of that field.
 */
export const normalizeServicenow: Normalizer = ({ headers, body, receivedAt }) => {
  const record = parsePayload(recordSchema, body, 'servicenow record');
  const ticket = text(record.number).trim();
  if (!ticket) return { ignored: 'servicenow record without a number' };
  const modCount = typeof record.sys_mod_count === 'number' ? record.sys_mod_count : Number(raw(record.sys_mod_count));
  if (!Number.isSafeInteger(modCount) || modCount < 0) {
    throw new CtxflowError('validation_error', 'servicenow record: sys_mod_count: expected a non-negative integer');
  }
  const title = text(record.short_description);
  const facts = [
    text(record.state) && `state ${text(record.state)}`,
    text(record.priority) && `priority ${text(record.priority)}`,
  ].filter(Boolean);
  const changes: TicketChange[] = [];
  const lines: string[] = [];
  const comment = text(record.comments).trim();
  const note = text(record.work_notes).trim();
  if (comment) {
    changes.push({ field: 'comments', from: null, to: comment });
    lines.push(`Comment: ${comment}`);
  }
  if (note) {
    changes.push({ field: 'work_notes', from: null, to: note });
    lines.push(`Work note: ${note}`);
  }
  const verb = modCount === 0 ? 'created' : 'updated';
  const headline = `${ticket} ${verb}: ${title}${facts.length ? ` (${facts.join(', ')})` : ''}`.trimEnd();
  const kind = modCount === 0 ? 'created' : comment ? 'commented' : note ? 'work_note' : 'updated';
  const author = text(record.sys_updated_by) || undefined;
  return {
    update: toTicketUpdate({
      source: 'servicenow',
      ticket,
      scope: text(record.sys_class_name) || undefined,
      eventId: standardWebhooksId(headers),
      kind,
      summary: lines.length ? `${headline}\n${lines.join('\n')}` : headline,
      title: title || undefined,
      author,
      version: modCount,
      occurredAt: servicenowTime(raw(record.sys_updated_on)) ?? receivedAt,
      changes: changes.length ? changes : undefined,
      receivedAt,
    }),
  };
};
