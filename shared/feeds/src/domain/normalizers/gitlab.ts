import { CtxflowError, type TicketChange } from '@ctxflow/contracts';
import { z } from 'zod';
import { singleHeader } from '../verifiers/verifier.ts';
import { changeValue, headerId, isoTime } from './fields.ts';
import { type Normalizer, parsePayload, show, toTicketUpdate } from './normalizer.ts';

/** GitLab events (header `X-Gitlab-Event`) this feed carries; any other is acknowledged and ignored. */
export const GITLAB_EVENTS = ['Issue Hook', 'Confidential Issue Hook', 'Note Hook', 'Confidential Note Hook'] as const;
/** The noteable types of a note this feed carries: notes on issues and other work items. */
const NOTEABLE = new Set(['Issue', 'WorkItem']);

const user = z.looseObject({ username: z.string().optional(), name: z.string().optional() });
const project = z.looseObject({ path_with_namespace: z.string().regex(/^\S+\/\S+$/, 'expected group/project') });
const issue = z.looseObject({
  iid: z.number().int().positive(),
  title: z.string().optional(),
  description: z.string().nullable().optional(),
  url: z.string().optional(),
  updated_at: z.string().optional(),
});

// The fields read from GitLab's work item and comment events (docs: "Webhook
// events": `Issue Hook`, `Note Hook`); every other field passes unread.
const issuePayload = z.looseObject({
  object_kind: z.string().optional(),
  user: user.optional(),
  project: project.nullable().optional(),
  object_attributes: issue.extend({
    action: z.string().optional(),
    state: z.string().optional(),
    type: z.string().optional(),
    updated_at: z.string().min(1),
  }),
  changes: z.record(z.string(), z.unknown()).optional(),
});

const notePayload = z.looseObject({
  user: user.optional(),
  project: project.nullable().optional(),
  object_attributes: z.looseObject({
    note: z.string(),
    noteable_type: z.string().min(1),
    action: z.string().optional(),
    url: z.string().optional(),
    updated_at: z.string().min(1),
  }),
  issue: issue.optional(),
  work_item: issue.optional(),
});

/** Changed fields that say nothing (times, who, numeric state ids): left out of the changes. */
const BOOKKEEPING = new Set([
  'updated_at',
  'updated_by_id',
  'last_edited_at',
  'last_edited_by_id',
  'state_id',
  'closed_at',
]);

const ISSUE_KINDS: Record<string, string> = { open: 'created', close: 'status', reopen: 'status', update: 'updated' };
const ISSUE_VERBS: Record<string, string> = { open: 'opened', close: 'closed', reopen: 'reopened', update: 'updated' };

function toChanges(changes: Record<string, unknown> | undefined): TicketChange[] {
  const out: TicketChange[] = [];
  for (const field of Object.keys(changes ?? {})) {
    if (BOOKKEEPING.has(field)) continue;
    const change = changes![field];
    if (typeof change !== 'object' || change === null) continue;
    const record = change as Record<string, unknown>;
    const from = changeValue(Object.hasOwn(record, 'previous') ? record.previous : undefined);
    const to = changeValue(Object.hasOwn(record, 'current') ? record.current : undefined);
    out.push({ field, from, to });
  }
  return out;
}

function eventIdOf(headers: Parameters<Normalizer>[0]['headers']): string {
  const id = headerId(headers, 'idempotency-key') ?? headerId(headers, 'x-gitlab-event-uuid');
  if (id === undefined)
    throw new CtxflowError('validation_error', 'missing idempotency-key or x-gitlab-event-uuid header');
  return id;
}

/**
 * GitLab `Issue Hook` and `Confidential Issue Hook` (issues, incidents, tasks
 * and other work item types: open, close, reopen, update) and `Note Hook` /
 * `Confidential Note Hook` on issues and work items. Ticket
 * `<path_with_namespace>#<iid>`, scope the project path; event id the
 * `Idempotency-Key` header (the same on every retry), else
 * `X-Gitlab-Event-UUID`. A note on a merge request, commit or snippet, and a
 * group-level work item (no project), are ignored.
 */
export const normalizeGitlab: Normalizer = ({ headers, body, receivedAt }) => {
  const event = singleHeader(headers, 'x-gitlab-event');
  if (!event) throw new CtxflowError('validation_error', 'missing x-gitlab-event header');
  if (!(GITLAB_EVENTS as readonly string[]).includes(event)) return { ignored: `gitlab event ${event}` };

  if (event.endsWith('Note Hook')) {
    const payload = parsePayload(notePayload, body, 'gitlab note payload');
    const note = payload.object_attributes;
    if (!NOTEABLE.has(note.noteable_type)) return { ignored: `gitlab note on a ${note.noteable_type}` };
    const item = payload.issue ?? payload.work_item;
    if (!payload.project) return { ignored: 'gitlab note naming no project' };
    if (!item) throw new CtxflowError('validation_error', 'gitlab note payload: issue: missing');
    const ticket = `${payload.project.path_with_namespace}#${item.iid}`;
    const author = payload.user?.username;
    const edited = note.action === 'update';
    return {
      update: toTicketUpdate({
        source: 'gitlab',
        ticket,
        scope: payload.project.path_with_namespace,
        eventId: eventIdOf(headers),
        kind: edited ? 'comment_edited' : 'commented',
        summary: `${author ?? 'someone'} ${edited ? 'edited a comment on' : 'commented on'} ${ticket}: ${note.note}`,
        title: item.title,
        url: note.url ?? item.url,
        author,
        occurredAt: isoTime(note.updated_at),
        receivedAt,
      }),
    };
  }

  const payload = parsePayload(issuePayload, body, 'gitlab issue payload');
  if (!payload.project) return { ignored: 'gitlab work item naming no project' };
  const item = payload.object_attributes;
  const ticket = `${payload.project.path_with_namespace}#${item.iid}`;
  const action = item.action ?? 'update';
  const author = payload.user?.username;
  const what = (item.type ?? 'issue').toLowerCase();
  const headline = `${author ?? 'someone'} ${ISSUE_VERBS[action] ?? action} ${what} ${ticket}: ${item.title ?? ''}`;
  const changes = toChanges(payload.changes);
  // GitLab reports the state as a number: closing implies it was opened, reopening that it was closed.
  if (action === 'close') changes.unshift({ field: 'state', from: 'opened', to: 'closed' });
  if (action === 'reopen') changes.unshift({ field: 'state', from: 'closed', to: 'opened' });
  const lines = changes.map((c) => `- ${c.field}: ${show(c.from)} -> ${show(c.to)}`);
  let summary = headline.trimEnd();
  if (action === 'open' && item.description) summary = `${summary}\n\n${item.description}`;
  else if (lines.length) summary = `${summary}\n${lines.join('\n')}`;
  return {
    update: toTicketUpdate({
      source: 'gitlab',
      ticket,
      scope: payload.project.path_with_namespace,
      eventId: eventIdOf(headers),
      kind: ISSUE_KINDS[action] ?? action.slice(0, 64),
      summary,
      title: item.title,
      url: item.url,
      author,
      occurredAt: isoTime(item.updated_at),
      changes: changes.length ? changes : undefined,
      receivedAt,
    }),
  };
};
