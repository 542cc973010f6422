import { CtxflowError, type TicketChange } from '@ctxflow/contracts';
import { z } from 'zod';
import { singleHeader } from '../verifiers/verifier.ts';
import { type Normalizer, parsePayload, toTicketUpdate } from './normalizer.ts';

/** GitHub events this feed carries (header `X-GitHub-Event`); any other is acknowledged and ignored. */
export const GITHUB_EVENTS = ['issues', 'issue_comment'] as const;

const user = z.looseObject({ login: z.string().min(1) });

// The fields read from GitHub's `issues` and `issue_comment` payloads
// (docs: "Webhook events and payloads"); every other field passes unread.
const issue = z.looseObject({
  number: z.number().int().positive(),
  title: z.string(),
  html_url: z.string().optional(),
  body: z.string().nullable().optional(),
  state: z.string().optional(),
  updated_at: z.string().min(1),
  user: user.optional(),
});
const repository = z.looseObject({ full_name: z.string().regex(/^[^/\s]+\/[^/\s]+$/, 'expected owner/repo') });

const issuesPayload = z.looseObject({
  action: z.string().min(1),
  issue,
  repository,
  sender: user.optional(),
  changes: z
    .looseObject({
      title: z.looseObject({ from: z.string() }).optional(),
      body: z.looseObject({ from: z.string().nullable() }).optional(),
    })
    .optional(),
  label: z.looseObject({ name: z.string() }).optional(),
  assignee: user.nullable().optional(),
});

const issueCommentPayload = z.looseObject({
  action: z.string().min(1),
  issue,
  repository,
  sender: user.optional(),
  comment: z.looseObject({
    body: z.string(),
    html_url: z.string().optional(),
    updated_at: z.string().min(1),
    user: user.optional(),
  }),
});

const ISSUE_KINDS: Record<string, string> = {
  opened: 'created',
  edited: 'updated',
  closed: 'status',
  reopened: 'status',
};
const COMMENT_KINDS: Record<string, string> = {
  created: 'commented',
  edited: 'comment_edited',
  deleted: 'comment_deleted',
};
const COMMENT_VERBS: Record<string, string> = {
  created: 'commented on',
  edited: 'edited a comment on',
  deleted: 'deleted a comment on',
};

function requireDelivery(headers: Parameters<Normalizer>[0]['headers'], name: string): string {
  const value = singleHeader(headers, name);
  if (!value) throw new CtxflowError('validation_error', `missing ${name} header`);
  if (value.length > 256) throw new CtxflowError('validation_error', `${name}: over 256 characters`);
  return value;
}

/**
 * GitHub `issues` and `issue_comment` events. Ticket `owner/repo#number`,
 * scope `owner/repo`, event id the `X-GitHub-Delivery` GUID (the same on a
 * redelivery, so a redelivered event is published once).
 */
export const normalizeGithub: Normalizer = ({ headers, body, receivedAt }) => {
  const event = requireDelivery(headers, 'x-github-event');
  if (!(GITHUB_EVENTS as readonly string[]).includes(event)) return { ignored: `github event ${event}` };
  const eventId = requireDelivery(headers, 'x-github-delivery');

  if (event === 'issue_comment') {
    const payload = parsePayload(issueCommentPayload, body, 'github issue_comment payload');
    const ticket = `${payload.repository.full_name}#${payload.issue.number}`;
    const author = payload.comment.user?.login ?? payload.sender?.login;
    const verb = COMMENT_VERBS[payload.action] ?? `${payload.action} a comment on`;
    return {
      update: toTicketUpdate({
        source: 'github',
        ticket,
        scope: payload.repository.full_name,
        eventId,
        kind: COMMENT_KINDS[payload.action] ?? `comment_${payload.action}`,
        summary: `${author ?? 'someone'} ${verb} ${ticket}: ${payload.comment.body}`,
        title: payload.issue.title,
        url: payload.comment.html_url ?? payload.issue.html_url,
        author,
        occurredAt: payload.comment.updated_at,
        receivedAt,
      }),
    };
  }

  const payload = parsePayload(issuesPayload, body, 'github issues payload');
  const { action, issue: item } = payload;
  const ticket = `${payload.repository.full_name}#${item.number}`;
  const author = payload.sender?.login;
  let headline = `${author ?? 'someone'} ${action} issue ${ticket}: ${item.title}`;
  if (payload.label && (action === 'labeled' || action === 'unlabeled')) headline += ` (label ${payload.label.name})`;
  if (payload.assignee && (action === 'assigned' || action === 'unassigned')) {
    headline += ` (assignee ${payload.assignee.login})`;
  }
  const changes: TicketChange[] = [];
  if (action === 'edited') {
    if (payload.changes?.title) changes.push({ field: 'title', from: payload.changes.title.from, to: item.title });
    if (payload.changes?.body) changes.push({ field: 'body', from: payload.changes.body.from, to: item.body ?? null });
  }
  // GitHub sends no "from" for state: closing implies it was open, and reopening that it was closed.
  if (action === 'closed') changes.push({ field: 'state', from: 'open', to: 'closed' });
  if (action === 'reopened') changes.push({ field: 'state', from: 'closed', to: 'open' });
  const summary = action === 'opened' && item.body ? `${headline}\n\n${item.body}` : headline;
  return {
    update: toTicketUpdate({
      source: 'github',
      ticket,
      scope: payload.repository.full_name,
      eventId,
      kind: ISSUE_KINDS[action] ?? action,
      summary,
      title: item.title,
      url: item.html_url,
      author,
      occurredAt: item.updated_at,
      changes: changes.length ? changes : undefined,
      receivedAt,
    }),
  };
};
