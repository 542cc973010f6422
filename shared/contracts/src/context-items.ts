import { z } from 'zod';
import { CtxflowError } from './errors.ts';
import { feedSourceSchema } from './ticket-update.ts';

/** What a context row carries (seed "Context rows"). */
export const CONTEXT_KINDS = ['instruction', 'notice', 'tools', 'memory'] as const;
export type ContextKind = (typeof CONTEXT_KINDS)[number];

/** Where a row came from; decides how it is presented to the model (R5, R6). */
export const ROW_SOURCES = ['app', 'hook', 'tool', 'memory', 'late-answer'] as const;
export type RowSource = (typeof ROW_SOURCES)[number];

/** The completion tool: always declared, never switched off (R20). */
export const FINISH_TOOL = '__finish__';

/** An item over this many bytes (UTF-8 of its JSON) is refused (R9). */
export const MAX_ITEM_BYTES = 32 * 1024;

/** A hook cursor: any JSON value the hook chose; stored verbatim on its rows (R23). */
export type Cursor = string | number | boolean | null | Cursor[] | { [key: string]: Cursor };
export const cursorSchema: z.ZodType<Cursor> = z.json() as z.ZodType<Cursor>;

const toolName = z.string().min(1).max(128);
const sourceField = z.enum(ROW_SOURCES).optional();

const textItem = <K extends 'instruction' | 'notice' | 'memory'>(kind: K) =>
  z.strictObject({ kind: z.literal(kind), content: z.string(), source: sourceField });

const toolsItem = z.strictObject({
  kind: z.literal('tools'),
  disable: z.array(toolName).optional(),
  enable: z.array(toolName).optional(),
  source: sourceField,
});

export const contextItemSchema = z.discriminatedUnion('kind', [
  textItem('instruction'),
  textItem('notice'),
  textItem('memory'),
  toolsItem,
]);

/**
 * One ticket update a hook notice carried: its feed and the feed's event id (the delivery id
 * the feed-ingestor deduplicates by, within the session's tenant).
 */
export const ticketUpdateRefSchema = z.strictObject({
  source: feedSourceSchema.meta({ description: 'The feed the update came in on.' }),
  eventId: z
    .string()
    .min(1)
    .max(256)
    .meta({ description: "The feed's event id (the delivery id it deduplicates by)." }),
});
export type TicketUpdateRef = z.infer<typeof ticketUpdateRefSchema>;

/**
 * The items of a stepContext hook's batch: a notice may name the ticket updates it carries
 * (`ticketUpdates`, optional: a hook that names none is answered as before). Only the hook's
 * items carry them; the app's and a tool's never do.
 */
export const hookItemSchema = z.discriminatedUnion('kind', [
  textItem('instruction'),
  z.strictObject({
    kind: z.literal('notice'),
    content: z.string(),
    source: sourceField,
    ticketUpdates: z.array(ticketUpdateRefSchema).max(1000).optional(),
  }),
  textItem('memory'),
  toolsItem,
]);

/** An item as a caller adds it: never a row (R2). A hook's notice may name its ticket updates. */
export type ContextItem = z.infer<typeof contextItemSchema> | z.infer<typeof hookItemSchema>;

/** An item after validation, with its source decided. */
export type SourcedItem = ContextItem & { source: RowSource };

/** A committed context row, as the public API shows it. */
export interface ContextRow {
  id: string;
  role: 'context';
  kind: ContextKind;
  source: RowSource;
  content?: string;
  disable?: string[];
  enable?: string[];
  cursor?: Cursor;
  /** Hook rows: the ticket updates the notice carried (several when coalesced). */
  ticketUpdates?: TicketUpdateRef[];
}

export function byteLength(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8');
}

/** Who adds the items; decides the default and the allowed sources (R8, R14, R19). */
export type ItemOrigin = 'app' | 'tool' | 'hook' | 'step-context';

/**
 * A kind as a refusal names it: by its type, never its value (text the caller chose, which
 * may be megabytes, or nested deeper than JSON.stringify can go).
 */
function describeKind(kind: unknown): string {
  if (typeof kind === 'string') return 'a string that is no kind';
  if (kind === null || kind === undefined) return String(kind);
  if (Array.isArray(kind)) return 'an array';
  return `a ${typeof kind}`;
}

function describeIssue(issue: z.core.$ZodIssue, raw: unknown): string {
  const where = issue.path.length ? issue.path.join('.') : 'item';
  if (raw && typeof raw === 'object' && !Array.isArray(raw)) {
    const kind = (raw as { kind?: unknown }).kind;
    if (!CONTEXT_KINDS.includes(kind as ContextKind)) {
      return `kind: ${describeKind(kind)}; expected one of ${CONTEXT_KINDS.join(', ')}`;
    }
  }
  return `${where}: ${issue.message}`;
}

/**
 * Validates one list of items as a whole: any bad item refuses them all (R9, R14).
 * Sources: a tool's items always carry `tool` (R8); a hook's and the app's default
 * to `app` (R8, R14); `hook` is reserved for the stepContext hook (R14); a tool may
 * switch tools off, never on (R19); nobody switches `__finish__` off (R9, R20).
 */
export function validateItems(raw: unknown, origin: ItemOrigin): SourcedItem[] {
  if (!Array.isArray(raw)) throw new CtxflowError('validation_error', 'items: expected an array of context items');
  return raw.map((entry, index) => {
    const parsed = (origin === 'step-context' ? hookItemSchema : contextItemSchema).safeParse(entry);
    if (!parsed.success) {
      const first = parsed.error.issues[0];
      const message = first ? describeIssue(first, entry) : 'invalid item';
      throw new CtxflowError('validation_error', `items[${index}]: ${message}`, {
        details: parsed.error.issues.map((i) => ({ path: [index, ...i.path], message: i.message })),
      });
    }
    const item = parsed.data;
    const fail = (message: string) => {
      throw new CtxflowError('validation_error', `items[${index}]: ${message}`);
    };
    if (byteLength(entry) > MAX_ITEM_BYTES)
      fail(`item is ${byteLength(entry)} bytes, over the ${MAX_ITEM_BYTES}-byte limit`);
    if (item.kind === 'tools') {
      if (!item.disable?.length && !item.enable?.length) fail('a tools item needs a non-empty disable or enable list');
      if (item.disable?.includes(FINISH_TOOL)) fail(`${FINISH_TOOL} can never be switched off`);
    }
    let source: RowSource;
    switch (origin) {
      case 'tool':
        source = 'tool';
        if (item.kind === 'tools' && item.enable?.length) fail('a tool may switch tools off, never on');
        break;
      case 'step-context':
        source = 'hook';
        break;
      default:
        if (item.source === 'hook') fail("source 'hook' is reserved for the stepContext hook");
        source = item.source ?? 'app';
    }
    return { ...item, source } as SourcedItem;
  });
}
