import { byteLength, type Cursor, cursorSchema, type SourcedItem, validateItems } from '@ctxflow/contracts';
import type { StepContextSource } from '../ports/step-context-source.ts';
import type { SkipReason } from './model.ts';

export type HookOutcome =
  | { type: 'none' }
  | { type: 'batch'; items: SourcedItem[]; cursor?: Cursor; leftOut: number; traceparents?: readonly string[] }
  | { type: 'skipped'; reason: SkipReason; message: string };

const TIMEOUT = Symbol('timeout');

/** The notice that closes an over-size batch (R27). */
export function leftOutNotice(count: number, maxBytes: number): SourcedItem {
  return {
    kind: 'notice',
    source: 'hook',
    content: `${count} more item${count === 1 ? '' : 's'} from the stepContext hook left out: the batch was over its ${maxBytes}-byte limit.`,
  };
}

/**
 * R27: keeps the items that fit, in order, then one notice saying how many
 * were left out. The batch measured is `{ items, cursor }` as JSON (R25).
 */
export function fitBatch(
  items: SourcedItem[],
  cursor: Cursor | undefined,
  maxBytes: number,
): { items: SourcedItem[]; leftOut: number } {
  if (byteLength({ items, cursor }) <= maxBytes) return { items, leftOut: 0 };
  let kept = 0;
  while (kept < items.length) {
    const candidate = [...items.slice(0, kept + 1), leftOutNotice(items.length - kept - 1, maxBytes)];
    if (byteLength({ items: candidate, cursor }) > maxBytes) break;
    kept++;
  }
  const leftOut = items.length - kept;
  return { items: [...items.slice(0, kept), leftOutNotice(leftOut, maxBytes)], leftOut };
}

/** Checks an untrusted hook answer: nothing, or `{ items, cursor? }` with valid items. */
export function parseHookResult(result: unknown): { items: SourcedItem[]; cursor?: Cursor } | undefined {
  if (result === undefined || result === null) return undefined;
  if (typeof result !== 'object' || Array.isArray(result)) throw new Error('result is not an object');
  const { items, cursor, ...rest } = result as { items?: unknown; cursor?: unknown };
  if (Object.keys(rest).length > 0) throw new Error(`unexpected fields: ${Object.keys(rest).join(', ')}`);
  const sourced = validateItems(items, 'step-context');
  if (cursor === undefined) return { items: sourced };
  const parsedCursor = cursorSchema.safeParse(cursor);
  if (!parsedCursor.success) throw new Error('cursor is not a JSON value');
  return { items: sourced, cursor: parsedCursor.data };
}

/**
 * Runs the stepContext hook under its limits (R25) and applies the skip rules
 * (R26): a throw, a timeout or an invalid result is a skip, never a failure of
 * the step.
 */
export async function runHook(
  source: StepContextSource,
  request: { sessionId: string; agentId?: string; cursor: Cursor | undefined },
  limits: { maxBytes: number; timeoutMs: number },
): Promise<HookOutcome> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<typeof TIMEOUT>((resolve) => {
    timer = setTimeout(() => {
      controller.abort(new Error(`stepContext hook timed out after ${limits.timeoutMs} ms`));
      resolve(TIMEOUT);
    }, limits.timeoutMs);
  });
  let raw: unknown;
  let traceparents: readonly string[] = [];
  const traced = (t: readonly string[]) => {
    if (!controller.signal.aborted) traceparents = [...t];
  };
  try {
    const call = Promise.resolve().then(() =>
      source.fetch({ ...request, maxBytes: limits.maxBytes, signal: controller.signal, traced }),
    );
    call.catch(() => {}); // a late rejection after the timeout is not unhandled
    raw = await Promise.race([call, timeout]);
  } catch (err) {
    return { type: 'skipped', reason: 'hook_error', message: err instanceof Error ? err.message : String(err) };
  } finally {
    clearTimeout(timer);
  }
  if (raw === TIMEOUT) {
    return {
      type: 'skipped',
      reason: 'hook_timeout',
      message: `stepContext hook timed out after ${limits.timeoutMs} ms`,
    };
  }
  let parsed: ReturnType<typeof parseHookResult>;
  try {
    parsed = parseHookResult(raw);
  } catch (err) {
    return {
      type: 'skipped',
      reason: 'hook_invalid',
      message: `invalid stepContext result: ${(err as Error).message}`,
    };
  }
  if (!parsed || parsed.items.length === 0) return { type: 'none' };
  const fitted = fitBatch(parsed.items, parsed.cursor, limits.maxBytes);
  return {
    type: 'batch',
    items: fitted.items,
    leftOut: fitted.leftOut,
    ...(traceparents.length > 0 ? { traceparents } : {}),
    ...(parsed.cursor === undefined ? {} : { cursor: parsed.cursor }),
  };
}
