/**
 * The reference model for the context engine's property test: plain bookkeeping
 * of what a session must contain, written from the requirements (docs/conformance.md)
 * and the README's "HTTP API", without the engine's code. The runner
 * (run-commands.ts) applies every command to the engine and to this model and
 * compares them after each one.
 */
import type { ContextRow, Cursor, RowSource } from '@ctxflow/contracts';
import type { StepResult } from '@ctxflow/session-runner';

export const TENANT = 'default';
export const FINISH = '__finish__';
/** The agent's tools: `c` needs an approval; `__finish__` is always declared (last). */
export const DECLARED = ['a', 'b', 'c', FINISH] as const;
export const AGENT_CONTEXT = 'You help with support tickets.';
export const FIRST_THREAD = 'Thread notes v0.';
/** stepContext limits of the agent under test: small, so over-size batches and timeouts are cheap. */
export const MAX_BYTES = 2048;
export const TIMEOUT_MS = 5;
/** A prefix idle longer than this (ms) is rebuilt at the next step (N4). */
export const CACHE_TTL_MS = 1000;
/** Calls are named from this pool so that gates, approvals and adds meet. */
export const CALL_POOL = 6;

/** An item exactly as a caller sends it. */
export interface RawItem {
  kind: string;
  content?: string;
  disable?: string[];
  enable?: string[];
  source?: string;
}

export interface Message {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  /** A context row's message: the row it is (Contract v2). */
  row?: { id: string; kind: ContextRow['kind']; source: RowSource };
}

/**
 * One accepted item: an add that answered `recorded > 0` made one of these per
 * item. Object identity is the item's identity: log entries and the queue hold
 * the same objects, so "at most once" is counted by reference.
 */
export interface LiveItem {
  /** The marker written into the item (`[m12]` in its content, `~m12` in a tools list). */
  marker: string;
  raw: RawItem;
  source: RowSource;
  origin: 'app' | 'tool' | 'hook';
  /** The tool call that queued it (tool origin only): it goes with that call (R29). */
  callId?: string;
}

export type ModelEntry =
  | { type: 'message'; role: 'user' | 'assistant' | 'tool'; content: string }
  | { type: 'row'; row: ContextRow; item?: LiveItem; batch?: number };

export interface ModelStep {
  stepId: string;
  ordinal: number;
  logStart: number;
  logEnd: number;
  requestId?: string;
  runId: number;
  /** The request this step answered, and the whole answer (for redeliveries). */
  messages: Message[];
  system: string;
  answer: StepResult;
}

export interface ModelCall {
  callId: string;
  name: string;
  /** Steps committed when the call was made. */
  stepIndex: number;
  status: 'executed' | 'refused' | 'awaiting_approval' | 'denied';
  reason?: 'tool_inactive' | 'tool_unavailable';
}

/** One `ctx.addContext` of a tool or hook, kept so a command can repeat it. */
export interface SiteAdd {
  callId: string;
  origin: 'tool' | 'hook';
  site?: string;
  items: RawItem[];
}

/** The first-wins record of a call site, with the items its recording made. */
export interface SiteRecord {
  live: LiveItem[];
}

export interface AppAdd {
  key?: string;
  items: RawItem[];
}

export interface ModelSession {
  id: string;
  /** The session this one was branched from. */
  branchOf?: string;
  log: ModelEntry[];
  queue: LiveItem[];
  steps: ModelStep[];
  calls: Map<string, ModelCall>;
  /** Idempotency keys used on this session: key -> the items first sent with it. */
  keys: Map<string, RawItem[]>;
  appAdds: AppAdd[];
  /** Call sites in this session's history (inherited by branches): site key -> record. */
  sites: Map<string, SiteRecord>;
  siteAdds: SiteAdd[];
  /** Thread context: `live` is in the prefix, `staged` waits for the next rebuild (N4). */
  thread: { live: string; staged?: string };
  forceRefresh: boolean;
  /** The system prefix of the last request; undefined before the first step. */
  system?: string;
  lastStepAt?: number;
  /** The agent context in the prefix (N3). */
  prefixAgent?: string;
  /** A run freezes the agent context when it starts (N3). */
  run?: { runId: number; startLength: number; open: boolean; agentContext: string };
  /** The request the next one must extend (R3); undefined when there is none. */
  lastRequest?: Message[];
  /** Messages of the previous request that survive (rewinds lower it): the next answer's `cache.previousEnd`. */
  requestEnd?: number;
  /** Every request id sent to this session (and its source before a branch). */
  requestIds: string[];
}

export function newSession(id: string): ModelSession {
  return {
    id,
    log: [],
    queue: [],
    steps: [],
    calls: new Map(),
    keys: new Map(),
    appAdds: [],
    sites: new Map(),
    siteAdds: [],
    thread: { live: FIRST_THREAD },
    forceRefresh: false,
    requestIds: [],
  };
}

export function systemPrefix(agentContext: string, thread: string): string {
  return `${agentContext}\n\n${thread}`;
}

/** The source an item's row must carry (R8, R14): a tool's is always `tool`; others default to `app`. */
export function sourceOf(raw: RawItem, origin: 'app' | 'tool' | 'hook' | 'step-context'): RowSource {
  if (origin === 'tool') return 'tool';
  if (origin === 'step-context') return 'hook';
  return (raw.source as RowSource | undefined) ?? 'app';
}

/** The row an item must become (R1, R5); `id` is the engine's. */
export function expectedRow(raw: RawItem, source: RowSource, cursor?: Cursor): Omit<ContextRow, 'id'> {
  const row: Omit<ContextRow, 'id'> = { role: 'context', kind: raw.kind as ContextRow['kind'], source };
  if (raw.kind === 'tools') {
    if (raw.disable?.length) row.disable = [...raw.disable];
    if (raw.enable?.length) row.enable = [...raw.enable];
  } else {
    row.content = raw.content ?? '';
  }
  if (cursor !== undefined) row.cursor = cursor;
  return row;
}

/** The queued item the engine must hold for an accepted item (validated, source decided). */
export function expectedQueued(item: LiveItem): Record<string, unknown> {
  return { ...item.raw, source: item.source };
}

/**
 * The README's rendering of a row: `<context kind=".." source="..">\n...\n</context>`,
 * system role for app, hook and memory rows, user role for tool and late-answer
 * rows (R6). Text cannot close the envelope it is quoted in.
 */
export function renderRow(row: ContextRow): Message {
  const role = row.source === 'tool' || row.source === 'late-answer' ? 'user' : 'system';
  let body: string;
  if (row.kind === 'tools') {
    const lines: string[] = [];
    if (row.disable?.length) lines.push(`disabled: ${row.disable.join(', ')}`);
    if (row.enable?.length) lines.push(`enabled: ${row.enable.join(', ')}`);
    body = lines.join('\n');
  } else {
    body = (row.content ?? '').replaceAll('</context', '<\\/context');
  }
  return {
    role,
    content: `<context kind="${row.kind}" source="${row.source}">\n${body}\n</context>`,
    // Contract v2: the row the message is.
    row: { id: row.id, kind: row.kind, source: row.source },
  };
}

export function renderEntry(entry: ModelEntry): Message {
  return entry.type === 'row' ? renderRow(entry.row) : { role: entry.role, content: entry.content };
}

/** R16, R18-R20: the active tools folded from a log. */
export function foldActive(log: ModelEntry[]): string[] {
  const active = new Set<string>(DECLARED);
  for (const entry of log) {
    if (entry.type !== 'row' || entry.row.kind !== 'tools') continue;
    for (const name of entry.row.disable ?? []) if (name !== FINISH) active.delete(name);
    if (entry.row.source === 'app' || entry.row.source === 'hook') {
      for (const name of entry.row.enable ?? []) if ((DECLARED as readonly string[]).includes(name)) active.add(name);
    }
  }
  active.add(FINISH);
  return DECLARED.filter((name) => active.has(name));
}

/** R23: the cursor of the last batch that reached the log. */
export function foldCursor(log: ModelEntry[]): Cursor | undefined {
  for (let i = log.length - 1; i >= 0; i--) {
    const entry = log[i]!;
    if (entry.type === 'row' && entry.row.cursor !== undefined) return entry.row.cursor;
  }
  return undefined;
}

/** Whether any of these accepted items is still in the log or the queue. */
export function present(session: ModelSession, items: LiveItem[]): boolean {
  const wanted = new Set(items);
  return (
    session.queue.some((i) => wanted.has(i)) ||
    session.log.some((e) => e.type === 'row' && !!e.item && wanted.has(e.item))
  );
}

/** The step `first`'s messages would be answered after: the request a rewind reverts to. */
function requestBefore(steps: ModelStep[]): Message[] | undefined {
  return steps.at(-1)?.messages;
}

/**
 * R28, R29: a rewind to a step (keep its rows) or before it (cut them). Calls
 * made in answer to model call `ordinal` or later are removed; cut rows of
 * queued items are queued again, once, unless a tool queued them and its call
 * was removed; queued items of removed calls go too. Returns how many were
 * queued again.
 */
export function rewindModel(session: ModelSession, target: ModelStep, before: boolean): number {
  const toLength = before ? target.logStart : target.logEnd;
  const removed = new Set(
    [...session.calls.values()].filter((c) => c.stepIndex >= target.ordinal).map((c) => c.callId),
  );
  const goes = (item: LiveItem) => item.origin === 'tool' && item.callId !== undefined && removed.has(item.callId);
  const requeue = session.log
    .slice(toLength)
    .flatMap((e) => (e.type === 'row' && e.item && !goes(e.item) ? [e.item] : []));
  session.log = session.log.slice(0, toLength);
  session.queue = [...requeue, ...session.queue.filter((i) => !goes(i))];
  for (const callId of removed) session.calls.delete(callId);
  session.steps = session.steps.filter((s) => (before ? s.ordinal < target.ordinal : s.ordinal <= target.ordinal));
  if (session.run && session.run.startLength > toLength) session.run.open = false;
  session.lastRequest = requestBefore(session.steps);
  if (session.requestEnd !== undefined) session.requestEnd = Math.min(session.requestEnd, 1 + toLength);
  return requeue.length;
}

/** R32: a branch copies the log (to a step's rows, or all), its steps and calls, never the queue. */
export function branchModel(source: ModelSession, id: string, at: ModelStep | undefined): ModelSession {
  const toLength = at ? at.logEnd : source.log.length;
  const keepCall = (c: ModelCall) => !at || c.stepIndex < at.ordinal;
  const steps = source.steps.filter((s) => !at || s.ordinal <= at.ordinal);
  const branch: ModelSession = {
    ...newSession(id),
    branchOf: source.id,
    log: source.log.slice(0, toLength),
    steps: [...steps],
    calls: new Map([...source.calls].filter(([, c]) => keepCall(c)).map(([k, c]) => [k, { ...c }])),
    sites: new Map([...source.sites].map(([k, r]) => [k, { ...r, live: [...r.live] }])),
    siteAdds: [...source.siteAdds],
    thread: { ...source.thread },
    forceRefresh: source.forceRefresh,
    requestIds: [...source.requestIds],
    ...(source.system === undefined ? {} : { system: source.system }),
    ...(source.prefixAgent === undefined ? {} : { prefixAgent: source.prefixAgent }),
    ...(source.lastStepAt === undefined ? {} : { lastStepAt: source.lastStepAt }),
    ...(source.requestEnd === undefined ? {} : { requestEnd: Math.min(source.requestEnd, 1 + toLength) }),
  };
  if (source.run) branch.run = { ...source.run, open: source.run.open && source.run.startLength <= toLength };
  const last = at ? at.messages : source.lastRequest;
  if (last) branch.lastRequest = last;
  return branch;
}

/** The marker of an accepted item in a row or queued item, if it carries one. */
export function markerOf(item: { content?: string; disable?: string[] }): string | undefined {
  const fromContent = item.content?.match(/^\[(m\d+)\]/)?.[1];
  if (fromContent) return fromContent;
  return item.disable?.find((n) => n.startsWith('~m'))?.slice(1);
}

/** The hook batch (and item index) a row came from, if it carries a batch marker. */
export function batchOf(row: { content?: string; disable?: string[] }): number | undefined {
  const text = row.content ?? row.disable?.find((n) => n.startsWith('~b')) ?? '';
  const match = text.match(/^(?:\[|~)b(\d+)\./);
  return match ? Number(match[1]) : undefined;
}
