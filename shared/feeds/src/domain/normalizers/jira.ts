import { CtxflowError, type TicketChange } from '@ctxflow/contracts';
import { z } from 'zod';
import { singleHeader } from '../verifiers/verifier.ts';
import { type Normalizer, parsePayload, scalar, show, toTicketUpdate } from './normalizer.ts';

/** Jira webhook events (`webhookEvent`) this feed carries; any other is acknowledged and ignored. */
export const JIRA_EVENTS = ['jira:issue_created', 'jira:issue_updated', 'comment_created'] as const;

const user = z.looseObject({ displayName: z.string().optional(), accountId: z.string().optional() });

// The fields read from Jira Cloud webhook bodies (docs: "Webhooks", example
// payload with `timestamp`, `webhookEvent`, `issue`, `user`, `changelog`,
// `comment`); every other field passes unread.
const payloadSchema = z.looseObject({
  webhookEvent: z.string(),
  /** Epoch milliseconds of the event at Jira. */
  timestamp: z.number().int().nonnegative(),
  issue: z.looseObject({
    id: z.union([z.string(), z.number()]),
    key: z.string().regex(/^[A-Za-z][A-Za-z0-9_]*-\d+$/, 'expected an issue key like PROJ-123'),
    self: z.string().optional(),
    fields: z
      .looseObject({
        summary: z.string().optional(),
        description: z.unknown().optional(),
        project: z.looseObject({ key: z.string().min(1) }).optional(),
      })
      .optional(),
  }),
  user: user.optional(),
  changelog: z
    .looseObject({
      id: z.union([z.string(), z.number()]).optional(),
      // Items carry `toString`, a name every object inherits: read as own properties only.
      items: z.array(z.record(z.string(), z.unknown())),
    })
    .optional(),
  comment: z
    .looseObject({
      id: z.union([z.string(), z.number()]),
      body: z.string(),
      author: user.optional(),
    })
    .optional(),
});

function own(record: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

function toChange(item: Record<string, unknown>, index: number): TicketChange {
  const field = own(item, 'field');
  if (typeof field !== 'string' || !field) {
    throw new CtxflowError('validation_error', `jira payload: changelog.items.${index}.field: expected a field name`);
  }
  return { field, from: scalar(own(item, 'fromString')), to: scalar(own(item, 'toString')) };
}

function browseUrl(self: string | undefined, key: string): string | undefined {
  if (!self) return undefined;
  try {
    return `${new URL(self).origin}/browse/${key}`;
  } catch {
    return undefined;
  }
}

/**
 * Jira Cloud admin webhooks. Ticket the issue key (`PROJ-123`), scope the
 * project key, version the event `timestamp`. Event id: the
 * `X-Atlassian-Webhook-Identifier` header (the same on every retry) when
 * present, else `${webhookEvent}:${issue.id}:${timestamp}`.
 */
export const normalizeJira: Normalizer = ({ headers, body, receivedAt }) => {
  const event = parsePayload(z.looseObject({ webhookEvent: z.string().min(1) }), body, 'jira payload').webhookEvent;
  if (!(JIRA_EVENTS as readonly string[]).includes(event)) return { ignored: `jira event ${event}` };
  const payload = parsePayload(payloadSchema, body, 'jira payload');
  const { issue, timestamp } = payload;
  const key = issue.key;
  const scope = issue.fields?.project?.key ?? key.slice(0, key.lastIndexOf('-'));
  const title = issue.fields?.summary;
  const headerId = singleHeader(headers, 'x-atlassian-webhook-identifier');
  const eventId = headerId && headerId.length <= 256 ? headerId : `${event}:${issue.id}:${timestamp}`;
  const base = {
    source: 'jira' as const,
    ticket: key,
    scope,
    eventId,
    title,
    url: browseUrl(issue.self, key),
    version: timestamp,
    occurredAt: new Date(timestamp).toISOString(),
    receivedAt,
  };

  if (event === 'comment_created') {
    if (!payload.comment) throw new CtxflowError('validation_error', 'jira payload: comment: missing');
    const author = payload.comment.author?.displayName;
    return {
      update: toTicketUpdate({
        ...base,
        kind: 'commented',
        author,
        summary: `${author ?? 'someone'} commented on ${key}: ${payload.comment.body}`,
      }),
    };
  }

  const author = payload.user?.displayName;
  if (event === 'jira:issue_created') {
    const description = issue.fields?.description;
    const headline = `${author ?? 'someone'} created ${key}: ${title ?? ''}`.trimEnd();
    return {
      update: toTicketUpdate({
        ...base,
        kind: 'created',
        author,
        summary: typeof description === 'string' && description ? `${headline}\n\n${description}` : headline,
      }),
    };
  }

  const changes = (payload.changelog?.items ?? []).map(toChange);
  const lines = changes.map((change) => `- ${change.field}: ${show(change.from)} -> ${show(change.to)}`);
  const headline = `${author ?? 'someone'} updated ${key}: ${title ?? ''}`.trimEnd();
  return {
    update: toTicketUpdate({
      ...base,
      kind: 'updated',
      author,
      summary: lines.length ? `${headline}\n${lines.join('\n')}` : headline,
      changes: changes.length ? changes : undefined,
    }),
  };
};
