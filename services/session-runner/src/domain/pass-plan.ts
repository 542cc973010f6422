import {
  byteLength,
  type ContextRow,
  type Cursor,
  MAX_ITEM_BYTES,
  type SourcedItem,
  type StepMode,
} from '@ctxflow/contracts';
import { foldActiveTools } from './active-tools.ts';
import { DEFAULT_CACHE_TTL_MS, toolsOf } from './agent-defaults.ts';
import { renderSystemPrefix, sameBlocks } from './context-blocks.ts';
import type { HookOutcome } from './hook-batch.ts';
import { type LogView, requestJsonBytes } from './log-view.ts';
import { foldAfterStep, logLengthOf } from './log-window.ts';
import type {
  AgentRecord,
  LogEntry,
  MessageEntry,
  RebuildReason,
  RowEntry,
  SessionMeta,
  SessionState,
  SkipReason,
  StepRecord,
  ToolDeclaration,
} from './model.ts';
import { renderRequest, sharedPrefixBytes, systemMessageBytes } from './model-request.ts';
import { closeTurn, pendingError } from './turns.ts';

/** What a context pass is planned from: the session as read (or held) and what its I/O brought. */
export interface PassInput {
  state: SessionState;
  agent: AgentRecord | undefined;
  mode: StepMode;
  requestId: string | undefined;
  stepId: string;
  /** The id of the run this step starts; undefined when the session's run is open. */
  runId: string | undefined;
  /** The clock reading of the pass, and its ISO text. */
  now: number;
  at: string;
  /** The results that close the last assistant message's turn (closingResults). */
  closed: MessageEntry[];
  /** The view of `state.log` (a window's starts at the window: originOf). */
  baseView: LogView;
  /** What the stepContext hook answered; undefined when the agent has no hook. */
  hook: HookOutcome | undefined;
  /** The recalled memories, when the pass injects memory (needsRecall); else undefined. */
  memories: string[] | undefined;
}

/** A planned step: what its one commit writes, and what its answer and figures are made of. */
export interface PassPlan {
  step: StepRecord;
  meta: SessionMeta;
  /** The new rows, after `closed`. */
  rows: RowEntry[];
  closed: MessageEntry[];
  /** The log after the step (from the state's logStart on): `view.log`. */
  log: readonly LogEntry[];
  /** The view of `log`: the base view with the closing results and the rows appended. */
  view: LogView;
  tools: ToolDeclaration[];
  skipped: { reason: SkipReason; message: string }[];
  /** The step starts a run, or rebuilds the prompt prefix (else only the meta's counters change). */
  freshRun: boolean;
  rebuilt: boolean;
  /** The system prompt and the log length of the previous request, when the session had one. */
  previousSystem: string | undefined;
  previousEnd: number | undefined;
}

function toRow(id: string, item: SourcedItem, cursor?: Cursor): ContextRow {
  const row: ContextRow = { id, role: 'context', kind: item.kind, source: item.source };
  if (item.kind === 'tools') {
    if (item.disable?.length) row.disable = [...item.disable];
    if (item.enable?.length) row.enable = [...item.enable];
  } else {
    row.content = item.content;
    // A hook notice's ticket updates (receipts); never part of what the model is sent.
    if ('ticketUpdates' in item && item.ticketUpdates?.length) {
      row.ticketUpdates = item.ticketUpdates.map(({ source, eventId }) => ({ source, eventId }));
    }
  }
  if (cursor !== undefined) row.cursor = cursor;
  return row;
}

/**
 * Every call of the last assistant message has its result before the model is called: the ones
 * ctxflow knows why (refused, denied, deadline missed, finished), as entries that follow the log.
 * Throws `state_calls_pending` while a call still waits.
 */
export function closingResults(state: SessionState, now: number, at: string): MessageEntry[] {
  const closing = closeTurn(state.log, state.calls, now, at);
  if (closing.pending.length > 0) throw pendingError(closing.pending, 'step');
  const length = logLengthOf(state);
  return closing.results.map((r, i) => Object.freeze({ ...r, seq: length + i }) as MessageEntry);
}

function rebuildReason(
  meta: SessionMeta,
  freshRun: boolean,
  agent: AgentRecord | undefined,
  now: number,
): RebuildReason | undefined {
  if (!meta.prefix) return 'new_thread';
  if (meta.forceRefresh) return 'force_refresh';
  if (freshRun && !sameBlocks(meta.run!.agentContext, meta.prefix.agentContext)) return 'agent_context';
  if (freshRun && meta.run!.model !== meta.prefix.model) return 'model_change';
  const ttl = agent?.cacheTtlMs ?? DEFAULT_CACHE_TTL_MS;
  if (meta.lastStepAt !== undefined && now - meta.lastStepAt > ttl) return 'cache_cold';
  return undefined;
}

function lastUserIndex(log: LogEntry[]): number {
  for (let i = log.length - 1; i >= 0; i--) {
    const e = log[i]!;
    if (e.type === 'message' && e.role === 'user') return i;
  }
  return -1;
}

/** The text of the last user message: what memory is recalled for. */
export function lastUserMessage(log: LogEntry[]): string {
  const i = lastUserIndex(log);
  return i < 0 ? '' : (log[i] as MessageEntry).content;
}

/** R34: memory is injected once per user turn, and again after a rewind removed it. */
export function needsRecall(log: LogEntry[]): boolean {
  const from = lastUserIndex(log) + 1;
  return !log.slice(from).some((e) => e.type === 'row' && e.row.kind === 'memory' && e.row.source === 'memory');
}

/**
 * One model call's context pass, planned (R2, R22): the run and the prompt prefix, the closing
 * results, then the rows of the queue (in order, R7), of the hook's batch (R22-R27) and of the
 * recalled memory (R34), the step record and the meta after it. Pure: reads nothing, writes nothing.
 */
export function planPass(input: PassInput): PassPlan {
  const { state, agent, stepId, now, at, closed } = input;
  const length = logLengthOf(state);
  // The pass replaces `run` and `prefix` whole and changes `thread` in place: a copy of
  // the meta and of its thread, the rest shared with the held state (never changed).
  const meta: SessionMeta = { ...state.meta, thread: { ...state.meta.thread } };
  const freshRun = input.runId !== undefined;
  if (input.runId !== undefined) {
    meta.run = {
      runId: input.runId,
      agentContext: agent?.context ?? [],
      startLength: length,
      startOrdinal: meta.steps,
      open: true,
      ...(agent?.model === undefined ? {} : { model: agent.model }),
    };
  }
  const run = meta.run!;
  const rebuild = rebuildReason(meta, freshRun, agent, now);
  if (rebuild) {
    if (meta.thread.staged) {
      meta.thread.live = meta.thread.staged;
      delete meta.thread.staged;
    }
    meta.forceRefresh = false;
    meta.prefix = {
      system: renderSystemPrefix(run.agentContext, meta.thread.live),
      agentContext: run.agentContext,
      ...(run.model === undefined ? {} : { model: run.model }),
    };
  }
  const system = meta.prefix!.system;

  // 1. The queue, in order (R7).
  const rows: RowEntry[] = [];
  const addRow = (item: SourcedItem, extra: Partial<RowEntry>, cursor?: Cursor) => {
    const seq = length + closed.length + rows.length;
    const row = Object.freeze(toRow(`${stepId}.${rows.length}`, item, cursor));
    rows.push(Object.freeze({ type: 'row', seq, stepId, at, row, ...extra }) as RowEntry);
  };
  for (const queued of state.queue) addRow(queued.item, { itemId: queued.itemId, queued });

  // 2. The stepContext hook's batch, from the stored cursor (R22-R27).
  const skipped: { reason: SkipReason; message: string }[] = [];
  const { hook } = input;
  if (hook?.type === 'skipped') skipped.push({ reason: hook.reason, message: hook.message });
  if (hook?.type === 'batch') for (const item of hook.items) addRow(item, {}, hook.cursor);

  // 3. Memory auto-inject (R34).
  if (input.memories !== undefined) {
    const item: SourcedItem = { kind: 'memory', source: 'memory', content: input.memories.join('\n') };
    if (byteLength(item) > MAX_ITEM_BYTES) {
      skipped.push({
        reason: 'memory_too_large',
        message: `recalled memory is ${byteLength(item)} bytes, over the ${MAX_ITEM_BYTES}-byte message limit`,
      });
      addRow({ kind: 'memory', source: 'memory', content: '' }, {});
    } else {
      addRow(item, {});
    }
  }

  if (input.baseView.log !== state.log) throw new Error('a pass is planned on the view of its own log');
  const view = input.baseView.append(closed.length > 0 ? [...closed, ...rows] : rows);
  const { log } = view;
  const tools = toolsOf(agent);
  const activeTools = foldActiveTools(tools, view.toolRows);
  const newCursor = rows.findLast((r) => r.row.cursor !== undefined)?.row.cursor ?? input.baseView.cursor;
  const step: StepRecord = {
    stepId,
    ordinal: meta.steps + 1,
    mode: input.mode,
    runId: run.runId,
    logStart: length,
    logEnd: length + closed.length + rows.length,
    rowIds: rows.map((r) => r.row.id),
    system,
    activeTools,
    cache: rebuild ? { rebuilt: true, reason: rebuild } : { rebuilt: false },
    at,
    ...(input.requestId === undefined ? {} : { requestId: input.requestId }),
    ...(newCursor === undefined ? {} : { cursor: newCursor }),
  };
  const previousEnd = meta.lastRequestEnd;
  const previousSystem = state.meta.prefix?.system;
  // Messages the previous request had: its system message, then the log it covered (lowered by rewinds).
  if (previousSystem !== undefined) step.previousEnd = (previousSystem.length > 0 ? 1 : 0) + (previousEnd ?? 0);
  if (run.model !== undefined) step.model = run.model;
  meta.steps += 1;
  meta.lastStepAt = now;
  meta.lastRequestEnd = step.logEnd;
  const fold = foldAfterStep(view, step.logEnd, agent?.memory.autoInject === true);
  if (fold !== undefined) meta.logFold = fold;
  return {
    step,
    meta,
    rows,
    closed,
    log,
    view,
    tools,
    skipped,
    freshRun,
    rebuilt: rebuild !== undefined,
    previousSystem,
    previousEnd,
  };
}

/**
 * The request's JSON bytes, and how many of them equal the previous request's (prompt-prefix
 * reuse), measured on the messages' roles and contents (the log view). On a log window the
 * previous request ends inside the window (the window starts where a request ended).
 * `systemBytes`: systemMessageBytes, or a memo of it (a session's prefix repeats for many steps).
 */
export function requestFigures(
  plan: PassPlan,
  systemBytes: (system: string) => number = systemMessageBytes,
): { requestBytes: number; prefixReusedBytes: number } {
  const { step, view, previousSystem, previousEnd, tools } = plan;
  const system = systemBytes(step.system);
  const requestBytes = requestJsonBytes(system, view);
  let reused = 0;
  if (previousSystem !== undefined && previousEnd !== undefined) {
    if (previousSystem === step.system) {
      // The log is append-only up to `previousEnd` (a rewind lowers it), so the previous
      // request is the first messages of this one: its bytes, without the closing bracket.
      reused = requestJsonBytes(system, view, previousEnd) - 1;
    } else if (previousSystem.length > 0 && step.system.length > 0) {
      // Two system messages differ before either ends (a JSON string's text never holds a bare
      // quote), so the requests share the bracket and the system messages' common start.
      reused =
        1 +
        sharedPrefixBytes(
          JSON.stringify({ role: 'system', content: previousSystem }),
          JSON.stringify({ role: 'system', content: step.system }),
        );
    } else {
      const previous = renderRequest(previousSystem, [], tools, []).messages.concat(
        view.messages.slice(0, previousEnd),
      );
      const messages = renderRequest(step.system, view.messages, tools, []).messages;
      reused = sharedPrefixBytes(JSON.stringify(previous).slice(0, -1), JSON.stringify(messages));
    }
  }
  return { requestBytes, prefixReusedBytes: reused };
}
