import { CtxflowError, type TicketChange } from '@ctxflow/contracts';
import { z } from 'zod';
import { changeValue, headerId } from './fields.ts';
import { type Normalizer, parsePayload, show, toTicketUpdate } from './normalizer.ts';

/** Linear entity types (`type`) this feed carries; any other is acknowledged and ignored. */
export const LINEAR_TYPES = ['Issue', 'Comment'] as const;
/** Linear data-change actions this feed carries. */
export const LINEAR_ACTIONS = ['create', 'update', 'remove'] as const;

/** A Linear issue identifier: the team key, `-`, the issue number (`WEB-43`). */
const IDENTIFIER = /^[A-Za-z0-9]{1,16}-\d{1,12}$/;
/** The identifier in an issue or comment URL: `https://linear.app/<org>/issue/WEB-43/<slug>#comment-...`. */
const URL_IDENTIFIER = /\/issue\/([A-Za-z0-9]{1,16}-\d{1,12})(?=[/#?]|$)/;

const named = z.looseObject({ name: z.string().optional() });
const issueFields = {
  identifier: z.string().optional(),
  number: z.number().int().nonnegative().optional(),
  title: z.string().optional(),
  team: z.looseObject({ key: z.string().optional() }).nullable().optional(),
};

// Linear's data-change payload (docs: "Webhooks", "Data change events payload"):
//   { action, type, createdAt, actor, data, url, updatedFrom, organizationId, webhookTimestamp, webhookId }
const payloadSchema = z.looseObject({
  action: z.string().min(1),
  type: z.string().min(1),
  createdAt: z.string().optional(),
  url: z.string().optional(),
  actor: named.nullable().optional(),
  webhookId: z.string().min(1).max(128).optional(),
  webhookTimestamp: z.number(),
  updatedFrom: z.record(z.string(), z.unknown()).optional(),
  data: z.record(z.string(), z.unknown()),
});

const issueData = z.looseObject({
  ...issueFields,
  description: z.string().nullable().optional(),
  url: z.string().optional(),
  updatedAt: z.string().optional(),
});

const commentData = z.looseObject({
  body: z.string(),
  url: z.string().optional(),
  updatedAt: z.string().optional(),
  user: named.nullable().optional(),
  issue: z.looseObject(issueFields).nullable().optional(),
});

/** Fields of `updatedFrom` that change on every update and say nothing. */
const BOOKKEEPING = new Set(['updatedAt', 'sortOrder', 'subIssueSortOrder', 'prioritySortOrder']);

/** The issue identifier: `identifier`, else team key and number, else the one in the URL. */
function identifierOf(
  issue: z.infer<z.ZodObject<typeof issueFields>> | null | undefined,
  urls: (string | undefined)[],
) {
  if (issue?.identifier && IDENTIFIER.test(issue.identifier)) return issue.identifier;
  const fromTeam = issue?.team?.key && issue.number !== undefined ? `${issue.team.key}-${issue.number}` : undefined;
  if (fromTeam && IDENTIFIER.test(fromTeam)) return fromTeam;
  for (const url of urls) {
    const match = url ? URL_IDENTIFIER.exec(url) : null;
    if (match) return match[1]!;
  }
  return undefined;
}

function own(record: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

const ISSUE_KINDS: Record<string, string> = { create: 'created', update: 'updated', remove: 'removed' };
const ISSUE_VERBS: Record<string, string> = { create: 'created', update: 'updated', remove: 'removed' };
const COMMENT_KINDS: Record<string, string> = {
  create: 'commented',
  update: 'comment_edited',
  remove: 'comment_deleted',
};
const COMMENT_VERBS: Record<string, string> = {
  create: 'commented on',
  update: 'edited a comment on',
  remove: 'deleted a comment on',
};

/**
 * Linear `Issue` and `Comment` data-change events (create, update, remove).
 * Ticket the issue identifier (`WEB-43`), scope its team key. Event id the
 * `Linear-Delivery` header when present, else `webhookId:webhookTimestamp`.
 * An update lists what changed: each key of `updatedFrom` (but the
 * bookkeeping ones) from its old value to the one in `data`. An event that
 * names no issue is ignored.
 */
export const normalizeLinear: Normalizer = ({ headers, body, receivedAt }) => {
  const payload = parsePayload(payloadSchema, body, 'linear payload');
  const { type, action } = payload;
  if (!(LINEAR_TYPES as readonly string[]).includes(type)) return { ignored: `linear ${type} event` };
  if (!(LINEAR_ACTIONS as readonly string[]).includes(action)) return { ignored: `linear ${type} ${action}` };
  const fallbackId = payload.webhookId === undefined ? undefined : `${payload.webhookId}:${payload.webhookTimestamp}`;
  const eventId = headerId(headers, 'linear-delivery') ?? fallbackId;
  if (eventId === undefined) {
    throw new CtxflowError('validation_error', 'linear payload: no linear-delivery header and no webhookId');
  }
  const author = payload.actor?.name;

  if (type === 'Comment') {
    const data = parsePayload(commentData, payload.data, 'linear payload: data');
    const ticket = identifierOf(data.issue, [payload.url, data.url]);
    if (ticket === undefined) return { ignored: 'linear comment naming no issue' };
    const by = author ?? data.user?.name;
    return {
      update: toTicketUpdate({
        source: 'linear',
        ticket,
        scope: ticket.slice(0, ticket.lastIndexOf('-')),
        eventId,
        kind: COMMENT_KINDS[action]!,
        summary: `${by ?? 'someone'} ${COMMENT_VERBS[action]} ${ticket}: ${data.body}`,
        title: data.issue?.title,
        url: payload.url ?? data.url,
        author: by,
        occurredAt: data.updatedAt ?? payload.createdAt ?? receivedAt,
        receivedAt,
      }),
    };
  }

  const data = parsePayload(issueData, payload.data, 'linear payload: data');
  const ticket = identifierOf(data, [payload.url, data.url]);
  if (ticket === undefined) return { ignored: 'linear issue without an identifier' };
  const headline = `${author ?? 'someone'} ${ISSUE_VERBS[action]} ${ticket}: ${data.title ?? ''}`.trimEnd();
  let summary = headline;
  let changes: TicketChange[] | undefined;
  if (action === 'create' && data.description) summary = `${headline}\n\n${data.description}`;
  if (action === 'update' && payload.updatedFrom) {
    const from = payload.updatedFrom;
    changes = Object.keys(from)
      .filter((field) => !BOOKKEEPING.has(field))
      .map((field) => ({ field, from: changeValue(own(from, field)), to: changeValue(own(payload.data, field)) }));
    const lines = changes.map((change) => {
      const line = `- ${change.field}: ${show(change.from)} -> ${show(change.to)}`;
      // An id that changed (`stateId`, `assigneeId`) is named by the object `data` carries beside it.
      const named = change.field.endsWith('Id') ? own(payload.data, change.field.slice(0, -2)) : undefined;
      const name =
        typeof named === 'object' && named !== null ? own(named as Record<string, unknown>, 'name') : undefined;
      return typeof name === 'string' ? `${line} (now ${show(name)})` : line;
    });
    if (lines.length) summary = `${headline}\n${lines.join('\n')}`;
    if (changes.length === 0) changes = undefined;
  }
  return {
    update: toTicketUpdate({
      source: 'linear',
      ticket,
      scope: ticket.slice(0, ticket.lastIndexOf('-')),
      eventId,
      kind: ISSUE_KINDS[action]!,
      summary,
      title: data.title,
      url: payload.url ?? data.url,
      author,
      occurredAt: data.updatedAt ?? payload.createdAt ?? receivedAt,
      changes,
      receivedAt,
    }),
  };
};
