import { hash } from 'node:crypto';
import {
  byteLength,
  type CacheHints,
  type ContextRow,
  CtxflowError,
  type Cursor,
  FINISH_TOOL,
  MAX_DEADLINE_MS,
  MAX_ITEM_BYTES,
  type ModelRequest as NeutralRequest,
  type SourcedItem,
  type StepFormat,
  type StepMode,
  validateItems,
} from '@ctxflow/contracts';
import type { CachedSessionStore } from '../ports/cached-session-store.ts';
import type { Clock } from '../ports/clock.ts';
import type { Ids } from '../ports/ids.ts';
import type { MemoryRecall } from '../ports/memory-recall.ts';
import type { SessionEvents } from '../ports/session-events.ts';
import type { SessionFeedData } from '../ports/session-feed-data.ts';
import type { StepContextSource } from '../ports/step-context-source.ts';
import { type PassTrace, type RunnerTelemetry, untracedPass } from '../ports/telemetry.ts';
import { foldActiveTools } from './active-tools.ts';
import { type ContextInput, mergeBlocks, renderSystemPrefix, sameBlocks, toBlocks } from './context-blocks.ts';
import { type HookOutcome, runHook } from './hook-batch.ts';
import { KeyedMutex } from './keyed-mutex.ts';
import { lateAnswerContent } from './late-answer.ts';
import type {
  AgentRecord,
  CallRecord,
  LogEntry,
  MessageEntry,
  MessageRole,
  QueuedItem,
  RebuildReason,
  RowEntry,
  SessionMeta,
  SessionState,
  SkipReason,
  StepRecord,
  ToolCallEntry,
  ToolDeclaration,
  ToolOutcome,
} from './model.ts';
import {
  type LogView,
  logView,
  openTurn,
  renderNeutralRequest,
  renderRequest,
  requestJsonBytes,
  sharedPrefixBytes,
  systemMessageBytes,
} from './render-request.ts';
import { checkToolParameters } from './tool-schema.ts';

export const DEFAULT_MAX_BYTES = 32 * 1024;
export const DEFAULT_TIMEOUT_MS = 5_000;
export const DEFAULT_CACHE_TTL_MS = 5 * 60_000;
export const DEFAULT_CLIENT_DEADLINE_MS = 60_000;

const FINISH_DECLARATION: ToolDeclaration = { name: FINISH_TOOL, description: 'Call when the task is complete.' };

/** The ports of the engine (create-engine.ts wires them). */
export interface EnginePorts {
  /** The session store with what this runner keeps of it (adapters/caching-session-store.ts). */
  store: CachedSessionStore;
  /** The stepContext hook of an agent: its HTTP hook, the ticket feed, or none. */
  stepContextFor(agent: AgentRecord | undefined): StepContextSource | undefined;
  memory: MemoryRecall;
  events: SessionEvents;
  clock: Clock;
  telemetry: RunnerTelemetry;
  ids: Ids;
  /** The session data the ticket feed keeps (erased with the session); none when no feed is wired. */
  feedData?: SessionFeedData;
}

export interface AgentInput {
  context?: ContextInput;
  model?: string;
  tools?: ToolDeclaration[];
  stepContext?: Partial<AgentRecord['stepContext']>;
  memory?: { autoInject: boolean };
  cacheTtlMs?: number;
}

/**
 * A step's answer (Contract v2): `request` is the neutral model request, `cache` the cache hints.
 * The v1 answer's fields keep their names and meanings; v2 only adds fields (to the messages, the
 * tools, the request and `cache`).
 */
export interface StepResult {
  stepId: string;
  mode: StepMode;
  rows: ContextRow[];
  request: NeutralRequest;
  cursor: Cursor | null;
  cache: CacheHints;
  skipped: { reason: SkipReason; message: string }[];
}

/** The step answer: the neutral format is the default (`format: 'neutral'` names it). */
export type NeutralStepResult = StepResult;

/** A message to record (`POST /sessions/:id/messages`). */
export interface MessageInput {
  role: MessageRole;
  content: string;
  callId?: string;
  toolCalls?: ToolCallEntry[];
}

/** A step as committed (or replayed): its record, the log it covered, the declared tools and its skips. */
interface Stepped {
  step: StepRecord;
  log: readonly LogEntry[];
  tools: ToolDeclaration[];
  skipped: { reason: SkipReason; message: string }[];
  /** The answer's request, when the pass rendered it already (during its commit's round trip). */
  request?: NeutralRequest;
  /** The session's cache key when it has its own (a branch keeps its origin's); else cacheKey(sessionId). */
  key?: string;
}

/** A call of the last assistant message without a result, that ctxflow cannot answer yet. */
export interface PendingCall {
  callId: string;
  name: string;
  status: 'awaiting_client' | 'awaiting_approval' | 'no_result';
}

/** The provider cache key of a session (Contract v2 `cache.key`): stable, 40 characters. */
export function cacheKey(sessionId: string): string {
  return `ctxflow-${hash('sha256', sessionId, 'hex').slice(0, 32)}`;
}

/**
 * The delta of a step's request for a runtime that has the first `since` messages of the session's
 * previous request: the messages from index `since` on, `since` echoed. Those `since` messages are
 * this request's first ones exactly when the prefix was not rebuilt (the system message may have
 * changed) and the previous request still has them (`previousEnd`: how many of its messages
 * survive rewinds, never more than this request has): every request is a prefix of the next (R3).
 * Otherwise the whole request with `since: 0`: the runtime replaces what it holds.
 */
export function deltaRequest(request: NeutralRequest, cache: CacheHints, since: number): NeutralRequest {
  if (cache.rebuilt || since > cache.previousEnd) return { ...request, since: 0 };
  return { ...request, messages: request.messages.slice(since), since };
}

/** A session's own cache key as a Stepped field: a branch's (kept from its origin), else none. */
function keyOf(meta: SessionMeta): { key?: string } {
  return meta.cacheKey === undefined ? {} : { key: meta.cacheKey };
}

/** The text of a result ctxflow records for a call that has none of its own. */
export function outcomeText(outcome: ToolOutcome, call: { name: string; deadlineAt?: number }): string {
  switch (outcome) {
    case 'tool_inactive':
      return `Not executed (tool_inactive): the tool ${call.name} is switched off.`;
    case 'tool_unavailable':
      return `Not executed (tool_unavailable): no tool named ${call.name} is offered.`;
    case 'approval_denied':
      return `Not executed (approval_denied): the call to ${call.name} was not approved.`;
    case 'deadline_missed':
      return `No answer (deadline_missed): the client did not answer ${call.name} by its deadline ${new Date(call.deadlineAt ?? 0).toISOString()}; a later answer comes as a context notice.`;
    default:
      return 'Finished.';
  }
}

export type ToolDecision =
  | { execute: true; client?: true; deadlineAt?: string }
  | { execute: false; reason: 'tool_inactive' | 'tool_unavailable' | 'approval_required' | 'approval_denied' };

/** The cursor of the last batch that reached the log (R23). */
export function foldCursor(log: LogEntry[]): Cursor | undefined {
  for (let i = log.length - 1; i >= 0; i--) {
    const entry = log[i]!;
    if (entry.type === 'row' && entry.row.cursor !== undefined) return entry.row.cursor;
  }
  return undefined;
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i > 0 ? ',' : '') + canonical(value[i]);
    return `${out}]`;
  }
  if (value && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    let out = '{';
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      out += `${i > 0 ? ',' : ''}${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`;
    }
    return `${out}}`;
  }
  return JSON.stringify(value);
}

/** The identity of a request's items for its idempotency key (R13). */
export function fingerprint(items: SourcedItem[]): string {
  return hash('sha256', canonical(items), 'hex');
}

/** Raw items longer than this are remembered by their SHA-256 instead of their JSON text. */
const RAW_ITEMS_TEXT_MAX = 1024;

/**
 * The identity of a request's items exactly as received, for a replayed key: their JSON
 * text, or its SHA-256 (hex) when longer than RAW_ITEMS_TEXT_MAX (a JSON array starts
 * with `[`, a digest never does). Equal raw items validate to the same items, so to the
 * same fingerprint. Undefined for anything but a JSON array (the full path judges it).
 */
function rawItems(items: unknown): string | undefined {
  if (!Array.isArray(items)) return undefined;
  let json: string;
  try {
    json = JSON.stringify(items);
  } catch {
    return undefined;
  }
  return json.length <= RAW_ITEMS_TEXT_MAX ? json : hash('sha256', json, 'hex');
}

/** The ISO text of a clock reading; steps in the same millisecond share it. */
let lastIso = { ms: Number.NaN, text: '' };
function isoTime(ms: number): string {
  if (ms !== lastIso.ms) lastIso = { ms, text: new Date(ms).toISOString() };
  return lastIso.text;
}

function toRow(id: string, item: SourcedItem, cursor?: Cursor): ContextRow {
  const row: ContextRow = { id, role: 'context', kind: item.kind, source: item.source };
  if (item.kind === 'tools') {
    if (item.disable?.length) row.disable = [...item.disable];
    if (item.enable?.length) row.enable = [...item.enable];
  } else {
    row.content = item.content;
  }
  if (cursor !== undefined) row.cursor = cursor;
  return row;
}

/** The last instant a JavaScript Date holds (ECMA-262 "Time Values and Time Range"). */
const LAST_DATE_MS = 8.64e15;

/** Attempts of a write that is refused when the session (or agent) changed since it was read. */
const CONFLICT_ATTEMPTS = 5;

/**
 * Optimistic concurrency: runs `attempt` (a read, a check and a write conditional on what was
 * read) until it does not answer `conflict`, at most CONFLICT_ATTEMPTS times; then a retryable
 * `state_conflict` saying `what` kept changing.
 */
async function untilSettled<T>(attempt: () => Promise<T | 'conflict'>, what: string): Promise<T> {
  for (let i = 0; i < CONFLICT_ATTEMPTS; i++) {
    const result = await attempt();
    if (result !== 'conflict') return result;
  }
  throw new CtxflowError('state_conflict', what);
}

/** Refuses a session of another tenant (or none: `owner` undefined) as absent. */
function ownedBy(owner: string | undefined, tenant: string, sessionId: string): void {
  if (owner !== tenant) throw new CtxflowError('state_session_not_found', `session ${sessionId} not found`);
}

/** Why a call of the open turn has no result, by what the gate knows of it at `now`. */
function outcomeOf(
  call: ToolCallEntry,
  record: CallRecord | undefined,
  now: number,
  log: readonly LogEntry[],
): ToolOutcome | PendingCall['status'] {
  if (record?.status === 'refused') return record.reason === 'tool_unavailable' ? 'tool_unavailable' : 'tool_inactive';
  if (record?.status === 'denied') return 'approval_denied';
  if (record?.deadlineAt !== undefined && now > record.deadlineAt) {
    if (record.status === 'awaiting_client') return 'deadline_missed';
    // Answered late (a late-answer notice), or on time before its call was recorded (a tool message).
    if (record.status === 'answered') {
      const onTime = log.some((e) => e.type === 'message' && e.role === 'tool' && e.callId === call.callId);
      return onTime ? 'no_result' : 'deadline_missed';
    }
  }
  if (call.name === FINISH_TOOL) return 'finished';
  if (record?.status === 'awaiting_client' || record?.status === 'awaiting_approval') return record.status;
  return 'no_result';
}

/**
 * What closes the turn of the last assistant message (before a step, a user message or the next
 * assistant message): for each of its calls without a result, one that ctxflow records where it knows
 * why (a gate refusal, a denied approval, a missed client deadline, `__finish__`), in call order;
 * `pending` the calls that still wait (a client answer before its deadline, an approval, a result the
 * runtime has not recorded).
 */
export function closeTurn(
  log: readonly LogEntry[],
  calls: readonly CallRecord[],
  now: number,
  at: string,
): { results: Omit<MessageEntry, 'seq'>[]; pending: PendingCall[] } {
  const { assistant, answered } = openTurn(log);
  const results: Omit<MessageEntry, 'seq'>[] = [];
  const pending: PendingCall[] = [];
  for (const call of assistant?.toolCalls ?? []) {
    if (answered.has(call.callId)) continue;
    const record = calls.find((c) => c.callId === call.callId);
    const outcome = outcomeOf(call, record, now, log);
    if (outcome === 'awaiting_client' || outcome === 'awaiting_approval' || outcome === 'no_result') {
      pending.push({ callId: call.callId, name: call.name, status: outcome });
    } else {
      const content = outcomeText(outcome, {
        name: call.name,
        ...(record?.deadlineAt === undefined ? {} : { deadlineAt: record.deadlineAt }),
      });
      results.push({ type: 'message', role: 'tool', content, callId: call.callId, name: call.name, outcome, at });
    }
  }
  return { results, pending };
}

/**
 * The refusal of a step or message while calls of the last assistant message wait for their results.
 * Not retryable: sending it again helps only after a result, an answer, a deadline or an approval (a
 * step request on the bus is answered with the refusal, not redelivered).
 */
function pendingError(pending: PendingCall[], what: string): CtxflowError {
  const list = pending.map((p) => `${p.callId} (${p.name}, ${p.status})`).join(', ');
  return new CtxflowError(
    'state_calls_pending',
    `${what}: calls of the last assistant message have no result yet: ${list}; record their results (POST /sessions/:sessionId/messages), or wait for the client's answer, its deadline or the approval, then send it again`,
    { details: { pending } },
  );
}

function decisionOf(call: CallRecord): ToolDecision {
  switch (call.status) {
    case 'executed':
    case 'answered':
      return { execute: true };
    case 'awaiting_client':
      // A record written before deadlines had a maximum may lie past the last date a Date holds.
      return {
        execute: true,
        client: true,
        deadlineAt: new Date(Math.min(call.deadlineAt ?? 0, LAST_DATE_MS)).toISOString(),
      };
    case 'awaiting_approval':
      return { execute: false, reason: 'approval_required' };
    case 'denied':
      return { execute: false, reason: 'approval_denied' };
    default:
      return { execute: false, reason: (call.reason ?? 'tool_inactive') as 'tool_inactive' | 'tool_unavailable' };
  }
}

/**
 * The context engine: every use case of the session-runner, over ports only.
 * Writes to one session are serialized in this process; the store's atomic
 * commits guard against other processes.
 */
export class ContextEngine {
  readonly #deps: EnginePorts;
  readonly #locks = new KeyedMutex();

  constructor(deps: EnginePorts) {
    this.#deps = deps;
  }

  #newId(prefix: string): string {
    return this.#deps.ids.newId(prefix);
  }

  // ---------------------------------------------------------------- agents

  async createAgent(tenant: string, input: AgentInput): Promise<AgentRecord> {
    const tools = this.#declareTools(input.tools ?? []);
    const agent: AgentRecord = {
      agentId: this.#newId('agt'),
      tenant,
      context: toBlocks(input.context),
      tools,
      stepContext: {
        maxBytes: input.stepContext?.maxBytes ?? DEFAULT_MAX_BYTES,
        timeoutMs: input.stepContext?.timeoutMs ?? DEFAULT_TIMEOUT_MS,
        ...(input.stepContext?.url ? { url: input.stepContext.url } : {}),
      },
      memory: { autoInject: input.memory?.autoInject ?? false },
      cacheTtlMs: input.cacheTtlMs ?? DEFAULT_CACHE_TTL_MS,
      createdAt: new Date(this.#deps.clock.now()).toISOString(),
      version: 1,
      ...(input.model ? { model: input.model } : {}),
    };
    await this.#deps.store.putAgent(agent);
    return agent;
  }

  /** N3, N6: the edit merges blocks by id and applies from the next run. */
  async updateAgent(
    tenant: string,
    agentId: string,
    input: { context?: ContextInput; model?: string },
  ): Promise<AgentRecord> {
    return untilSettled(async () => {
      const agent = await this.getAgent(tenant, agentId);
      const next: AgentRecord = { ...agent, version: agent.version + 1 };
      if (input.context !== undefined) next.context = mergeBlocks(agent.context, toBlocks(input.context));
      if (input.model !== undefined) next.model = input.model;
      return (await this.#deps.store.replaceAgent(next, agent.version)) ? next : 'conflict';
    }, 'the agent changed while it was updated; send the update again');
  }

  async getAgent(tenant: string, agentId: string): Promise<AgentRecord> {
    const agent = await this.#deps.store.getAgent(agentId);
    if (!agent || agent.tenant !== tenant)
      throw new CtxflowError('state_agent_not_found', `agent ${agentId} not found`);
    return agent;
  }

  /**
   * Erases an agent, its memories and (with `cascade`) its sessions. Refused with
   * `state_agent_in_use` while sessions of it exist and `cascade` is false. An unknown
   * agent or another tenant's is left alone and answers the same as a deleted one
   * (nothing tells them apart): a repeat succeeds.
   */
  async deleteAgent(tenant: string, agentId: string, options: { cascade?: boolean } = {}): Promise<void> {
    const agent = await this.#deps.store.getAgent(agentId);
    if (!agent || agent.tenant !== tenant) return;
    const sessions = await this.#deps.store.sessionsOfAgent(tenant, agentId);
    if (sessions.length > 0 && options.cascade !== true) {
      throw new CtxflowError(
        'state_agent_in_use',
        `agent ${agentId} has ${sessions.length} session(s); delete them, or the agent with ?cascade=true`,
      );
    }
    for (const sessionId of sessions) await this.deleteSession(tenant, sessionId);
    // The memories first: a retry after a failure still finds the agent, so it erases them.
    await this.#deps.memory.forget(agentId);
    await this.#deps.store.deleteAgent(agentId);
  }

  /**
   * Erases a session in every store: the feed's data (subscriptions first, so no update
   * is appended to it any more), then the session store's records, then the feed's again
   * (a subscription made while the session was being erased). An unknown session or
   * another tenant's is left alone and answers the same as an erased one (nothing tells
   * them apart): a repeat succeeds. A failure leaves the meta, so a retry erases the rest.
   * Its branches are sessions of their own and stay.
   */
  async deleteSession(tenant: string, sessionId: string): Promise<void> {
    await this.#locks.run(sessionId, async () => {
      const meta = await this.#deps.store.getMeta(sessionId);
      if (!meta || meta.tenant !== tenant) return;
      await this.#deps.feedData?.eraseSession(sessionId, tenant);
      await this.#deps.store.deleteSession(sessionId);
      this.#deps.events.forget(sessionId); // the stream's replay holds message text
      await this.#deps.feedData?.eraseSession(sessionId, tenant);
    });
  }

  async remember(tenant: string, agentId: string, content: string): Promise<void> {
    await this.getAgent(tenant, agentId);
    await this.#deps.memory.remember(agentId, content);
  }

  #declareTools(tools: ToolDeclaration[]): ToolDeclaration[] {
    const seen = new Set<string>();
    for (const tool of tools) {
      if (seen.has(tool.name)) throw new CtxflowError('validation_error', `tools: ${tool.name} is declared twice`);
      seen.add(tool.name);
      if (tool.parameters !== undefined) checkToolParameters(tool.name, tool.parameters);
    }
    // `__finish__` is always declared, whatever `tools` says.
    return seen.has(FINISH_TOOL) ? tools : [...tools, FINISH_DECLARATION];
  }

  // ---------------------------------------------------------------- sessions

  async createSession(tenant: string, input: { agentId?: string; context?: ContextInput }): Promise<SessionMeta> {
    if (input.agentId !== undefined) await this.getAgent(tenant, input.agentId);
    const meta: SessionMeta = {
      sessionId: this.#newId('ses'),
      tenant,
      createdAt: new Date(this.#deps.clock.now()).toISOString(),
      thread: { live: toBlocks(input.context) },
      forceRefresh: false,
      steps: 0,
      ...(input.agentId === undefined ? {} : { agentId: input.agentId }),
    };
    await this.#deps.store.createSession(meta, [], [], []);
    return meta;
  }

  /** N4, N5, N6: thread context is staged until the next rebuild; forceRefresh folds it now. */
  async updateSession(tenant: string, sessionId: string, input: { context?: ContextInput; forceRefresh?: boolean }) {
    return this.#locks.run(sessionId, async () => {
      const { meta } = await this.#load(tenant, sessionId);
      const next = structuredClone(meta);
      if (input.context !== undefined) {
        next.thread.staged = mergeBlocks(meta.thread.staged ?? meta.thread.live, toBlocks(input.context));
      }
      if (input.forceRefresh) next.forceRefresh = true;
      await this.#deps.store.putMeta(next);
      return { staged: next.thread.staged !== undefined, forceRefresh: next.forceRefresh };
    });
  }

  /**
   * Refuses a session of another tenant as absent, without loading the log. A
   * session's tenant never changes, so a known one answers at once, without a read or
   * a promise (undefined; a write that follows still finds an absent session absent);
   * an unknown one gives the promise of its read.
   */
  #checkOwner(tenant: string, sessionId: string): Promise<void> | undefined {
    const owner = this.#deps.store.tenantOf(sessionId);
    if (typeof owner !== 'string') return owner.then((read) => ownedBy(read, tenant, sessionId));
    ownedBy(owner, tenant, sessionId);
    return undefined;
  }

  async #load(tenant: string, sessionId: string): Promise<SessionState> {
    const state = await this.#deps.store.load(sessionId);
    if (!state || state.meta.tenant !== tenant) {
      throw new CtxflowError('state_session_not_found', `session ${sessionId} not found`);
    }
    return state;
  }

  /**
   * What a pass runs on. A held session is not read: the commit checks the held
   * state's version. Otherwise (or for a request the held state has committed: a
   * redelivery) ONE round trip reads the session, its agent (a session never changes
   * agent) and a committed request together.
   */
  async #passInput(
    tenant: string,
    sessionId: string,
    requestId: string | undefined,
  ): Promise<{ state: SessionState; agent: AgentRecord | undefined } | { state: SessionState; done: StepRecord }> {
    const held = this.#deps.store.held(sessionId);
    // A request the held state knows as committed is a redelivery: answered from the store.
    const redelivered = requestId !== undefined && held?.requestIds.includes(requestId);
    if (held && held.meta.tenant === tenant && !redelivered) {
      return { state: held, agent: await this.#passAgent(held.meta) };
    }
    const knownAgent = this.#deps.store.agentIdOf(sessionId);
    const [state, done, prefetched] = await Promise.all([
      this.#load(tenant, sessionId),
      requestId === undefined ? undefined : this.#deps.store.getStep(sessionId, { requestId }),
      knownAgent === undefined ? undefined : this.#deps.store.getAgent(knownAgent),
    ]);
    if (done) return { state, done };
    this.#deps.store.hold(sessionId, state);
    return { state, agent: await this.#passAgent(state.meta, prefetched) };
  }

  /**
   * The agent of a pass: read when a run starts (its context and model apply from
   * the next run, N3 N6), otherwise the agent as last read, whose tools, hook and
   * memory settings never change.
   */
  async #passAgent(meta: SessionMeta, fresh?: AgentRecord): Promise<AgentRecord | undefined> {
    const { agentId } = meta;
    if (agentId === undefined) return undefined;
    return (
      fresh ?? (meta.run?.open ? this.#deps.store.knownAgent(agentId) : undefined) ?? this.#deps.store.getAgent(agentId)
    );
  }

  async #agentOf(meta: SessionMeta): Promise<AgentRecord | undefined> {
    return meta.agentId === undefined ? undefined : this.#deps.store.getAgent(meta.agentId);
  }

  #tools(agent: AgentRecord | undefined): ToolDeclaration[] {
    return agent?.tools ?? [FINISH_DECLARATION];
  }

  // ---------------------------------------------------------------- adding context

  /**
   * R12-R14: the app's `POST /context`. A key this runner saw replayed, sent again with
   * the same raw items, is answered as a replay after the tenant check and one store read
   * of the key's fingerprint, without validating or fingerprinting the items again; any
   * other request (or a store that does not confirm) takes the full path.
   */
  async addContext(
    tenant: string,
    input: { sessionId: string; items: unknown; key?: string },
  ): Promise<{ recorded: number }> {
    const known = input.key === undefined ? undefined : this.#deps.store.replayedKey(input.sessionId, input.key);
    if (known !== undefined && input.key !== undefined && known.raw === rawItems(input.items)) {
      // These items validated before, so the full path would reach the tenant check too.
      const ownerRead = this.#checkOwner(tenant, input.sessionId);
      if (ownerRead !== undefined) await ownerRead;
      if ((await this.#deps.store.keyFingerprint(input.sessionId, input.key)) === known.fingerprint) {
        return { recorded: 0 };
      }
    }
    const items = validateItems(input.items, 'app');
    const ownerRead = this.#checkOwner(tenant, input.sessionId);
    if (ownerRead !== undefined) await ownerRead;
    const at = new Date(this.#deps.clock.now()).toISOString();
    const dedupe =
      input.key === undefined ? undefined : { type: 'key' as const, key: input.key, fingerprint: fingerprint(items) };
    const result = await this.#deps.store.enqueue(
      input.sessionId,
      items.map((item) => ({ item, at })),
      dedupe,
    );
    if (result.outcome === 'replayed' && dedupe !== undefined) {
      const raw = rawItems(input.items);
      if (raw !== undefined)
        this.#deps.store.keyReplayed(input.sessionId, dedupe.key, { raw, fingerprint: dedupe.fingerprint });
    }
    switch (result.outcome) {
      case 'recorded':
        return { recorded: result.items.length };
      case 'replayed':
        return { recorded: 0 };
      case 'conflict':
        throw new CtxflowError(
          'state_context_key_conflict',
          `key ${JSON.stringify(input.key)} was used with other items; send new items under a new key`,
        );
      default:
        throw new CtxflowError('state_session_not_found', `session ${input.sessionId} not found`);
    }
  }

  /** R7, R8, R10, R15: a tool's or hook's `ctx.addContext`, first-wins per call site. */
  async addCallContext(
    tenant: string,
    sessionId: string,
    input: { callId: string; origin: 'tool' | 'hook'; site?: string; items: unknown },
  ): Promise<{ recorded: number }> {
    const items = validateItems(input.items, input.origin);
    const state = await this.#load(tenant, sessionId);
    const call = state.calls.find((c) => c.callId === input.callId);
    const at = new Date(this.#deps.clock.now()).toISOString();
    const site = `${input.origin}:${input.site ?? (input.origin === 'tool' ? (call?.name ?? 'tool') : 'hook')}`;
    const tied =
      input.origin === 'tool' ? { callId: input.callId, callStepIndex: call?.stepIndex ?? state.meta.steps } : {};
    const result = await this.#deps.store.enqueue(
      sessionId,
      items.map((item) => ({ item, at, ...tied })),
      { type: 'site', callId: input.callId, site },
    );
    if (result.outcome === 'not_found')
      throw new CtxflowError('state_session_not_found', `session ${sessionId} not found`);
    return { recorded: result.outcome === 'recorded' ? result.items.length : 0 };
  }

  // ---------------------------------------------------------------- messages

  /** One message (v1). */
  async appendMessage(tenant: string, sessionId: string, input: MessageInput): Promise<MessageEntry> {
    return (await this.appendMessages(tenant, sessionId, [input]))[0]!;
  }

  /**
   * Records messages in order, in ONE store write (an assistant turn with its tool results: no step
   * lands between them). A tool message answers a call of an earlier assistant message or one the
   * gate knows, and takes its name. A user or assistant message first closes the turn of the last
   * assistant message (closeTurn): ctxflow records the results it knows why, and refuses (409) while
   * a call still waits. A second result for a call with the same content records nothing (its entry is
   * answered); with other content it is refused. Returns the entry of each input, in order.
   */
  async appendMessages(tenant: string, sessionId: string, inputs: MessageInput[]): Promise<MessageEntry[]> {
    return this.#locks.run(sessionId, () =>
      untilSettled(
        () => this.#recordMessages(tenant, sessionId, inputs),
        `session ${sessionId} kept changing while the messages were recorded; send them again`,
      ),
    );
  }

  /**
   * One attempt of appendMessages: validates the inputs against one read of the session and
   * appends them only while the session still has that read's version; `conflict` (nothing
   * written) when another write came in between (another runner), to validate again.
   */
  async #recordMessages(
    tenant: string,
    sessionId: string,
    inputs: MessageInput[],
  ): Promise<MessageEntry[] | 'conflict'> {
    const state = await this.#load(tenant, sessionId);
    const next = structuredClone(state.meta);
    const now = this.#deps.clock.now();
    const at = new Date(now).toISOString();
    const log: LogEntry[] = state.log.slice();
    const added: Omit<MessageEntry, 'seq'>[] = [];
    /** Per input: the index of its entry in `added`, or an entry already in the log. */
    const answers: (number | MessageEntry)[] = [];
    const push = (entry: Omit<MessageEntry, 'seq'>) => {
      added.push(entry);
      log.push({ ...entry, seq: log.length } as MessageEntry);
      return added.length - 1;
    };
    const usedCallIds = new Set<string>();
    for (const entry of state.log) {
      if (entry.type === 'message') for (const call of entry.toolCalls ?? []) usedCallIds.add(call.callId);
    }
    for (const [i, input] of inputs.entries()) {
      const where = inputs.length > 1 ? `messages.${i}` : 'message';
      const message: Omit<MessageEntry, 'seq'> = { type: 'message', role: input.role, content: input.content, at };
      if (input.role === 'tool') {
        if (input.callId === undefined) {
          answers.push(push(message));
          continue;
        }
        message.callId = input.callId;
        const result = this.#resultFor(log, state.calls, input.callId, where);
        if (result.existing) {
          if (result.existing.content !== input.content) {
            throw new CtxflowError(
              'validation_error',
              `${where}: call ${input.callId} already has a result (seq ${result.existing.seq}); a second result is refused`,
            );
          }
          answers.push(result.existing);
          continue;
        }
        message.name = result.name;
        answers.push(push(message));
        continue;
      }
      // A user or assistant message closes the turn of the last assistant message.
      const closing = closeTurn(log, state.calls, now, at);
      if (closing.pending.length > 0) throw pendingError(closing.pending, `${where} (${input.role})`);
      for (const result of closing.results) push(result);
      if (input.role === 'user' && next.run?.open) next.run.open = false; // A user turn ends the run (N3).
      if (input.callId !== undefined) message.callId = input.callId;
      if (input.toolCalls?.length) {
        for (const call of input.toolCalls) {
          if (usedCallIds.has(call.callId)) {
            throw new CtxflowError(
              'validation_error',
              `${where}: callId ${call.callId} is already used by another call`,
            );
          }
          usedCallIds.add(call.callId);
        }
        message.toolCalls = input.toolCalls.map((c) => ({ ...c }));
      }
      answers.push(push(message));
    }
    if (added.length === 0) return answers as MessageEntry[];
    const appended = await this.#deps.store.appendMessages(sessionId, added, next, state.version);
    if (appended === 'conflict') return 'conflict';
    const stored = appended.entries as MessageEntry[];
    for (const entry of stored) {
      this.#deps.events.publish(sessionId, {
        type: 'message',
        seq: entry.seq,
        role: entry.role,
        content: entry.content,
        at,
      });
    }
    return answers.map((a) => (typeof a === 'number' ? stored[a]! : a));
  }

  /**
   * The call a tool message answers: a call of the last assistant message (its result is the first
   * tool message after it), or any other call an earlier assistant message made or the gate knows
   * (its result is any tool message for it). Refuses a callId no call has.
   */
  #resultFor(
    log: readonly LogEntry[],
    calls: readonly CallRecord[],
    callId: string,
    where: string,
  ): { name: string; existing?: MessageEntry } {
    const turn = openTurn(log);
    const inTurn = turn.assistant?.toolCalls?.find((c) => c.callId === callId);
    if (inTurn) {
      const existing = turn.answered.get(callId);
      return existing ? { name: inTurn.name, existing } : { name: inTurn.name };
    }
    let name: string | undefined;
    let existing: MessageEntry | undefined;
    for (const entry of log) {
      if (entry.type !== 'message') continue;
      if (entry.role === 'tool' && entry.callId === callId) existing ??= entry;
      name ??= entry.toolCalls?.find((c) => c.callId === callId)?.name;
    }
    name ??= calls.find((c) => c.callId === callId)?.name;
    if (name === undefined) {
      throw new CtxflowError(
        'validation_error',
        `${where}: callId ${callId} matches no call of an earlier assistant message and no call the gate knows`,
      );
    }
    return existing ? { name, existing } : { name };
  }

  /** R4: what a user may see: messages only, never a context row. */
  async listMessages(tenant: string, sessionId: string) {
    const { log } = await this.#load(tenant, sessionId);
    return log
      .filter((e): e is MessageEntry => e.type === 'message')
      .map((e) => ({
        seq: e.seq,
        role: e.role,
        content: e.content,
        at: e.at,
        ...(e.callId ? { callId: e.callId } : {}),
        ...(e.name ? { name: e.name } : {}),
        ...(e.outcome ? { outcome: e.outcome } : {}),
        ...(e.toolCalls ? { toolCalls: e.toolCalls } : {}),
      }));
  }

  /** R4: a snapshot a UI may show: no context row in it. */
  async snapshot(tenant: string, sessionId: string) {
    const state = await this.#load(tenant, sessionId);
    const agent = await this.#agentOf(state.meta);
    const cursor = foldCursor(state.log);
    return {
      sessionId,
      agentId: state.meta.agentId ?? null,
      createdAt: state.meta.createdAt,
      branchOf: state.meta.branchOf ?? null,
      messages: await this.listMessages(tenant, sessionId),
      steps: state.meta.steps,
      queued: state.queue.length,
      cursor: cursor ?? null,
      activeTools: foldActiveTools(this.#tools(agent), state.log),
    };
  }

  /** The operator's view (inspector): everything, rows included. */
  async inspect(tenant: string, sessionId: string) {
    const state = await this.#load(tenant, sessionId);
    const agent = await this.#agentOf(state.meta);
    const steps = await this.#deps.store.listSteps(sessionId);
    return {
      meta: state.meta,
      log: state.log.map((e) => (e.type === 'row' ? { seq: e.seq, type: 'row', stepId: e.stepId, row: e.row } : e)),
      queue: state.queue,
      calls: state.calls,
      steps,
      cursor: foldCursor(state.log) ?? null,
      activeTools: foldActiveTools(this.#tools(agent), state.log),
      recent: this.#deps.events.recent(sessionId),
    };
  }

  recentChunks(sessionId: string) {
    return this.#deps.events.recent(sessionId);
  }

  subscribe(sessionId: string, listener: Parameters<SessionEvents['subscribe']>[1]) {
    return this.#deps.events.subscribe(sessionId, listener);
  }

  async listSessions(tenant: string, limit = 100) {
    return this.#deps.store.listSessions(tenant, limit);
  }

  // ---------------------------------------------------------------- the context pass

  /**
   * One model call's context pass (R2, R22): drain the queue, call the
   * stepContext hook from the stored cursor, recall memory, commit every new row
   * in ONE store commit, then render the request. A `requestId` already
   * committed returns that step again, committing nothing (R33, redelivery).
   */
  /**
   * A model call's context pass. The answer is Contract v2's neutral request (the default;
   * `format: 'neutral'` names it).
   */
  async step(
    tenant: string,
    sessionId: string,
    input: { mode?: StepMode; requestId?: string; format?: StepFormat; since?: number } = {},
  ): Promise<StepResult> {
    const mode = input.mode ?? 'first';
    const stepped = await this.#locks.run(sessionId, () => this.#tracedPass(tenant, sessionId, mode, input.requestId));
    return this.#answer(sessionId, stepped, input.since);
  }

  /**
   * A step's answer, from the step and the log it covered: the same for a redelivered request.
   * `since`: a delta (deltaRequest).
   */
  #answer(sessionId: string, { step, log, tools, skipped, request, key }: Stepped, since?: number): StepResult {
    const rows = log.slice(step.logStart).flatMap((e) => (e.type === 'row' ? [e.row] : []));
    const cache: CacheHints = {
      rebuilt: step.cache.rebuilt,
      reason: step.cache.reason ?? null,
      key: key ?? cacheKey(sessionId),
      prefixEnd: step.system.length > 0 ? 0 : -1,
      previousEnd: step.previousEnd ?? 0,
    };
    const full = request ?? this.#request(step, log, tools);
    return {
      stepId: step.stepId,
      mode: step.mode,
      rows,
      request: since === undefined ? full : deltaRequest(full, cache, since),
      cursor: step.cursor ?? null,
      cache,
      skipped,
    };
  }

  /** The neutral model request of a step. */
  #request(
    step: StepRecord,
    log: readonly LogEntry[],
    tools: readonly ToolDeclaration[],
    base?: readonly LogEntry[],
  ): NeutralRequest {
    return renderNeutralRequest({
      system: step.system,
      log,
      ...(base === undefined ? {} : { base }),
      tools,
      activeTools: step.activeTools,
      model: step.model,
      forced: step.mode === 'forced_completion',
    });
  }

  /** The pass inside the telemetry's context-pass span, when the telemetry has one. */
  #tracedPass(tenant: string, sessionId: string, mode: StepMode, requestId: string | undefined): Promise<Stepped> {
    const { telemetry } = this.#deps;
    if (!telemetry.contextPass) return this.#pass(tenant, sessionId, mode, requestId, untracedPass);
    return telemetry.contextPass({ sessionId, mode }, (trace) => this.#pass(tenant, sessionId, mode, requestId, trace));
  }

  async #pass(
    tenant: string,
    sessionId: string,
    mode: StepMode,
    requestId: string | undefined,
    trace: PassTrace,
  ): Promise<Stepped> {
    const started = performance.now();
    let linked: HookOutcome | undefined;
    let hookMemo: { cursor: Cursor | undefined; outcome: HookOutcome } | undefined;
    for (let attempt = 0; attempt < 5; attempt++) {
      const input = await this.#passInput(tenant, sessionId, requestId);
      if ('done' in input) return this.#replay(input.state, input.done);
      const { state, agent } = input;
      const now = this.#deps.clock.now();
      const at = isoTime(now);
      // The pass replaces `run` and `prefix` whole and changes `thread` in place: a copy of
      // the meta and of its thread, the rest shared with the held state (never changed).
      const meta: SessionMeta = { ...state.meta, thread: { ...state.meta.thread } };
      const stepId = this.#newId('stp');
      trace.step(stepId);

      const freshRun = !meta.run?.open;
      if (freshRun) {
        meta.run = {
          runId: this.#newId('run'),
          agentContext: agent?.context ?? [],
          startLength: state.log.length,
          startOrdinal: meta.steps,
          open: true,
          ...(agent?.model === undefined ? {} : { model: agent.model }),
        };
      }
      const run = meta.run!;
      const rebuild = this.#rebuildReason(meta, freshRun, agent, now);
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

      // 0. Every call of the last assistant message has its result before the model is called: the
      // ones ctxflow knows why (refused, denied, deadline missed, finished) are recorded with the rows.
      const closing = closeTurn(state.log, state.calls, now, at);
      if (closing.pending.length > 0) throw pendingError(closing.pending, 'step');
      const closed = closing.results.map((r, i) => Object.freeze({ ...r, seq: state.log.length + i }) as MessageEntry);

      // 1. The queue, in order (R7).
      const rows: RowEntry[] = [];
      const addRow = (item: SourcedItem, extra: Partial<RowEntry>, cursor?: Cursor) => {
        const seq = state.log.length + closed.length + rows.length;
        const row = Object.freeze(toRow(`${stepId}.${rows.length}`, item, cursor));
        rows.push(Object.freeze({ type: 'row', seq, stepId, at, row, ...extra }) as RowEntry);
      };
      for (const queued of state.queue) addRow(queued.item, { itemId: queued.itemId, queued });

      // 2. The stepContext hook from the stored cursor (R22-R27).
      const skipped: { reason: SkipReason; message: string }[] = [];
      // A held log's view is held with it: a step renders its new entries alone.
      const baseView = logView(state.log, this.#deps.store.heldView(sessionId));
      const cursor = baseView.cursor;
      const hook = this.#deps.stepContextFor(agent);
      if (hook) {
        if (!hookMemo || canonical(hookMemo.cursor) !== canonical(cursor)) {
          const outcome = await runHook(
            hook,
            { sessionId, cursor, ...(meta.agentId === undefined ? {} : { agentId: meta.agentId }) },
            agent?.stepContext ?? { maxBytes: DEFAULT_MAX_BYTES, timeoutMs: DEFAULT_TIMEOUT_MS },
          );
          hookMemo = { cursor, outcome };
        }
        const outcome = hookMemo.outcome;
        if (outcome.type === 'skipped') skipped.push({ reason: outcome.reason, message: outcome.message });
        if (outcome.type === 'batch') {
          for (const item of outcome.items) addRow(item, {}, outcome.cursor);
          // The updates behind these rows: linked once, however often the commit is retried.
          if (linked !== outcome && outcome.traceparents) trace.link(outcome.traceparents);
          linked = outcome;
        }
      }

      // 3. Memory auto-inject (R34): once per user turn, again after a rewind removed it.
      if (agent?.memory.autoInject && this.#needsRecall(state.log)) {
        const query = this.#lastUserMessage(state.log);
        const memories = await this.#deps.memory.recall({ agentId: agent.agentId, sessionId, query });
        const item: SourcedItem = { kind: 'memory', source: 'memory', content: memories.join('\n') };
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

      const log = closed.length > 0 ? state.log.concat(closed, rows) : state.log.concat(rows);
      const view = logView(log, baseView);
      const tools = this.#tools(agent);
      const activeTools = foldActiveTools(tools, view.toolRows);
      const newCursor = rows.findLast((r) => r.row.cursor !== undefined)?.row.cursor ?? cursor;
      const step: StepRecord = {
        stepId,
        ordinal: meta.steps + 1,
        mode,
        runId: run.runId,
        logStart: state.log.length,
        logEnd: log.length,
        rowIds: rows.map((r) => r.row.id),
        system,
        activeTools,
        cache: rebuild ? { rebuilt: true, reason: rebuild } : { rebuilt: false },
        at,
        ...(requestId === undefined ? {} : { requestId }),
        ...(newCursor === undefined ? {} : { cursor: newCursor }),
      };
      const previousEnd = meta.lastRequestEnd;
      const previousSystem = state.meta.prefix?.system;
      // Messages the previous request had: its system message, then the log it covered (lowered by rewinds).
      if (previousSystem !== undefined) step.previousEnd = (previousSystem.length > 0 ? 1 : 0) + (previousEnd ?? 0);
      if (run.model !== undefined) step.model = run.model;
      meta.steps += 1;
      meta.lastStepAt = now;
      meta.lastRequestEnd = log.length;

      const commit = () =>
        this.#deps.store.commitStep(sessionId, {
          step,
          rows: closed.length > 0 ? [...closed, ...rows] : rows,
          drain: state.queue.map((q) => q.itemId),
          expectedLogLength: state.log.length,
          expectedVersion: state.version,
          meta,
          // A step that neither starts a run nor rebuilds the prefix changes only the counters.
          countersOnly: !freshRun && !rebuild,
          wholeQueue: true,
        });
      const { telemetry } = this.#deps;
      const committing = telemetry.storeCommit
        ? telemetry.storeCommit({ sessionId, rowCount: rows.length }, commit)
        : commit();
      // While the commit's round trip runs: the answer's request and the byte figures (used
      // only if it commits).
      // The pass's log extends the held one: only its new entries are walked.
      const request = this.#request(step, log, tools, state.log);
      const figures = this.#requestFigures(step, view, previousSystem, previousEnd, tools);
      const result = await committing;
      if (result.outcome !== 'committed') {
        // Another write came between the read (or the held state) and this commit (the held state is dropped).
        if (result.outcome === 'duplicate') return this.#replay(await this.#load(tenant, sessionId), result.step);
        continue;
      }
      this.#deps.store.hold(
        sessionId,
        {
          ...state,
          meta,
          log,
          queue: [],
          requestIds: requestId === undefined ? state.requestIds : [...state.requestIds, requestId],
          version: result.version,
        },
        view,
      );

      // Results ctxflow recorded are messages like any other on the stream (never a row, R4).
      for (const entry of closed) {
        this.#deps.events.publish(sessionId, {
          type: 'message',
          seq: entry.seq,
          role: entry.role,
          content: entry.content,
          at,
        });
      }
      this.#report(sessionId, step, rows, skipped, started, figures);
      return { step, log, tools, skipped, request, ...keyOf(meta) };
    }
    throw new CtxflowError(
      'state_conflict',
      `session ${sessionId} kept changing during the context pass; send the step again`,
    );
  }

  #report(
    sessionId: string,
    step: StepRecord,
    rows: RowEntry[],
    skipped: { reason: SkipReason; message: string }[],
    started: number,
    figures: { requestBytes: number; prefixReusedBytes: number },
  ) {
    const { telemetry, events } = this.#deps;
    for (const skip of skipped) {
      telemetry.contextSkipped({ sessionId, stepId: step.stepId, reason: skip.reason, message: skip.message });
      events.publish(sessionId, { type: 'context_skipped', stepId: step.stepId, ...skip, at: step.at });
    }
    events.publish(sessionId, {
      type: 'step',
      stepId: step.stepId,
      mode: step.mode,
      rowCount: rows.length,
      at: step.at,
    });
    telemetry.stepCommitted({
      sessionId,
      stepId: step.stepId,
      mode: step.mode,
      rows: rows.map((r) => ({ kind: r.row.kind, source: r.row.source })),
      durationMs: performance.now() - started,
      ...figures,
    });
  }

  /**
   * The request's JSON bytes, and how many of them equal the previous request's (prompt-prefix
   * reuse), measured on the messages' roles and contents (the log view).
   */
  #requestFigures(
    step: StepRecord,
    view: LogView,
    previousSystem: string | undefined,
    previousEnd: number | undefined,
    tools: ToolDeclaration[],
  ): { requestBytes: number; prefixReusedBytes: number } {
    const system = systemMessageBytes(step.system);
    const requestBytes = requestJsonBytes(system, view);
    let reused = 0;
    if (previousSystem !== undefined && previousEnd !== undefined) {
      if (previousSystem === step.system) {
        // The log is append-only up to `previousEnd` (a rewind lowers it), so the previous
        // request is the first messages of this one: its bytes, without the closing bracket.
        reused = requestJsonBytes(system, view, previousEnd) - 1;
      } else {
        const previous = renderRequest(previousSystem, [], tools, []).messages.concat(
          view.messages.slice(0, previousEnd),
        );
        const messages = renderRequest(step.system, view, tools, []).messages;
        reused = sharedPrefixBytes(JSON.stringify(previous).slice(0, -1), JSON.stringify(messages));
      }
    }
    return { requestBytes, prefixReusedBytes: reused };
  }

  /** A step committed before: the same answer, nothing committed again. */
  async #replay(state: SessionState, step: StepRecord): Promise<Stepped> {
    const agent = await this.#agentOf(state.meta);
    const log = state.log.slice(0, step.logEnd);
    // A step committed before the step record kept its model: the model of its run, if still known.
    const run = state.meta.run;
    const replayed =
      step.model === undefined && run?.runId === step.runId && run.model !== undefined
        ? { ...step, model: run.model }
        : step;
    return { step: replayed, log, tools: this.#tools(agent), skipped: [], ...keyOf(state.meta) };
  }

  #rebuildReason(
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

  #lastUserIndex(log: LogEntry[]): number {
    for (let i = log.length - 1; i >= 0; i--) {
      const e = log[i]!;
      if (e.type === 'message' && e.role === 'user') return i;
    }
    return -1;
  }

  #lastUserMessage(log: LogEntry[]): string {
    const i = this.#lastUserIndex(log);
    return i < 0 ? '' : (log[i] as MessageEntry).content;
  }

  #needsRecall(log: LogEntry[]): boolean {
    const from = this.#lastUserIndex(log) + 1;
    return !log.slice(from).some((e) => e.type === 'row' && e.row.kind === 'memory' && e.row.source === 'memory');
  }

  // ---------------------------------------------------------------- tools

  /** R17, R20: the tool gate. A repeated callId gets the same decision. */
  async gateToolCall(
    tenant: string,
    sessionId: string,
    input: { callId: string; name: string },
  ): Promise<ToolDecision> {
    return this.#locks.run(sessionId, async () => {
      const state = await this.#load(tenant, sessionId);
      const existing = state.calls.find((c) => c.callId === input.callId);
      if (existing) return decisionOf(existing);
      const agent = await this.#agentOf(state.meta);
      const tools = this.#tools(agent);
      const declared = tools.find((t) => t.name === input.name);
      const call: CallRecord = {
        callId: input.callId,
        name: input.name,
        stepIndex: state.meta.steps,
        status: 'executed',
      };
      if (!declared) {
        call.status = 'refused';
        call.reason = 'tool_unavailable';
      } else if (!foldActiveTools(tools, state.log).includes(input.name)) {
        call.status = 'refused';
        call.reason = 'tool_inactive';
      } else if (declared.needsApproval && declared.name !== FINISH_TOOL) {
        call.status = 'awaiting_approval';
      } else if (declared.client) {
        call.status = 'awaiting_client';
        call.deadlineAt = this.#deadline(declared);
      }
      // The answer is built before the record is written: a failure leaves nothing behind.
      const decision = decisionOf(call);
      await this.#deps.store.putCall(sessionId, call);
      return decision;
    });
  }

  /**
   * When a client tool's answer is due: its declared deadline (at most
   * MAX_DEADLINE_MS, also for an agent stored before that limit) from now.
   */
  #deadline(declared: ToolDeclaration | undefined): number {
    return this.#deps.clock.now() + Math.min(declared?.deadlineMs ?? DEFAULT_CLIENT_DEADLINE_MS, MAX_DEADLINE_MS);
  }

  /**
   * R21: an approval answers "may this call run", not "override the switch":
   * a switch-off in the log or still queued refuses it.
   */
  async answerApproval(tenant: string, sessionId: string, callId: string, approved: boolean): Promise<ToolDecision> {
    return this.#locks.run(sessionId, async () => {
      const state = await this.#load(tenant, sessionId);
      const call = state.calls.find((c) => c.callId === callId);
      if (!call) throw new CtxflowError('state_call_not_found', `call ${callId} not found`);
      if (call.status !== 'awaiting_approval') return decisionOf(call);
      const agent = await this.#agentOf(state.meta);
      const tools = this.#tools(agent);
      const next: CallRecord = { ...call };
      if (!approved) {
        next.status = 'denied';
      } else if (!foldActiveTools(tools, state.log, state.queue).includes(call.name)) {
        next.status = 'refused';
        next.reason = 'tool_inactive';
      } else if (tools.find((t) => t.name === call.name)?.client) {
        next.status = 'awaiting_client';
        next.deadlineAt = this.#deadline(tools.find((t) => t.name === call.name));
      } else {
        next.status = 'executed';
      }
      const decision = decisionOf(next);
      await this.#deps.store.putCall(sessionId, next);
      return decision;
    });
  }

  /** R35: a client tool's answer; after its deadline it becomes a late-answer notice. */
  async answerClientCall(
    tenant: string,
    sessionId: string,
    callId: string,
    content: string,
  ): Promise<{ late: boolean; recorded: number }> {
    return this.#locks.run(sessionId, () =>
      untilSettled(
        () => this.#answerClientCall(tenant, sessionId, callId, content),
        `session ${sessionId} kept changing while the answer was recorded; send it again`,
      ),
    );
  }

  /**
   * One attempt of answerClientCall. An on-time answer is recorded only while the session has
   * the version it was checked on (no result of the runtime came in between); `conflict`
   * (nothing written) otherwise.
   */
  async #answerClientCall(
    tenant: string,
    sessionId: string,
    callId: string,
    content: string,
  ): Promise<{ late: boolean; recorded: number } | 'conflict'> {
    const state = await this.#load(tenant, sessionId);
    const call = state.calls.find((c) => c.callId === callId);
    if (!call || (call.status !== 'awaiting_client' && call.status !== 'answered')) {
      throw new CtxflowError('state_call_not_found', `call ${callId} is not waiting for a client answer`);
    }
    if (call.status === 'answered') return { late: false, recorded: 0 };
    const now = this.#deps.clock.now();
    const at = new Date(now).toISOString();
    const late = now > (call.deadlineAt ?? Number.POSITIVE_INFINITY);
    if (late) {
      const item: SourcedItem = {
        kind: 'notice',
        source: 'late-answer',
        content: lateAnswerContent(call.name, callId, content),
      };
      validateItems([{ kind: item.kind, content: item.content }], 'app');
      await this.#deps.store.enqueue(sessionId, [{ item, at }], {
        type: 'site',
        callId,
        site: 'late-answer',
      });
    } else {
      // A result the runtime already recorded for this call stays the only one.
      const turn = openTurn(state.log);
      const answered = turn.assistant?.toolCalls?.some((c) => c.callId === callId)
        ? turn.answered.has(callId)
        : state.log.some((e) => e.type === 'message' && e.role === 'tool' && e.callId === callId);
      if (answered) {
        await this.#deps.store.putCall(sessionId, { ...call, status: 'answered' });
        return { late: false, recorded: 0 };
      }
      const appended = await this.#deps.store.appendMessages(
        sessionId,
        [{ type: 'message', role: 'tool', content, callId, name: call.name, at }],
        undefined,
        state.version,
      );
      if (appended === 'conflict') return 'conflict';
    }
    await this.#deps.store.putCall(sessionId, { ...call, status: 'answered' });
    return { late, recorded: 1 };
  }

  // ---------------------------------------------------------------- rewinds, branches, restarts

  async #target(sessionId: string, ref: { toStepId?: string; beforeStepId?: string }) {
    const steps = await this.#deps.store.listSteps(sessionId);
    const id = ref.toStepId ?? ref.beforeStepId;
    if (id === undefined) throw new CtxflowError('validation_error', 'give toStepId or beforeStepId');
    const step = steps.find((s) => s.stepId === id);
    if (!step) throw new CtxflowError('state_step_not_found', `step ${id} not found in session ${sessionId}`);
    const before = ref.toStepId === undefined;
    return {
      steps,
      step,
      toLength: before ? step.logStart : step.logEnd,
      /** Steps that survive. */
      keep: steps.filter((s) => (before ? s.ordinal < step.ordinal : s.ordinal <= step.ordinal)),
      /** Calls made in answer to model call `ordinal` or later are removed with it. */
      callRemoved: (call: { stepIndex: number }) => call.stepIndex >= step.ordinal,
    };
  }

  /**
   * R28, R29: truncates the log after a step (`toStepId`) or before it
   * (`beforeStepId`). Delivered items whose rows were cut are queued again once,
   * unless the tool call that queued them was cut too; the cursor, the active
   * tools and memory follow from what is left.
   */
  async rewind(tenant: string, sessionId: string, ref: { toStepId?: string; beforeStepId?: string }) {
    return this.#locks.run(sessionId, () => this.#rewind(tenant, sessionId, ref));
  }

  async #rewind(tenant: string, sessionId: string, ref: { toStepId?: string; beforeStepId?: string }) {
    const state = await this.#load(tenant, sessionId);
    const target = await this.#target(sessionId, ref);
    const removedCalls = new Set(state.calls.filter(target.callRemoved).map((c) => c.callId));
    const goesWithCall = (q: QueuedItem) => q.callId !== undefined && removedCalls.has(q.callId);
    const requeue = state.log
      .slice(target.toLength)
      .flatMap((e) => (e.type === 'row' && e.queued && !goesWithCall(e.queued) ? [e.queued] : []));
    const meta = structuredClone(state.meta);
    meta.steps = target.keep.length;
    meta.lastRequestEnd = Math.min(meta.lastRequestEnd ?? 0, target.toLength);
    if (meta.run && meta.run.startLength > target.toLength) meta.run.open = false;
    const ok = await this.#deps.store.rewind(sessionId, {
      expectedLogLength: state.log.length,
      toLength: target.toLength,
      requeue,
      dropItems: state.queue.filter(goesWithCall).map((q) => q.itemId),
      dropCalls: [...removedCalls],
      dropSteps: target.steps.filter((s) => !target.keep.includes(s)).map((s) => s.stepId),
      meta,
    });
    if (!ok) throw new CtxflowError('state_conflict', `session ${sessionId} changed during the rewind; send it again`);
    const at = new Date(this.#deps.clock.now()).toISOString();
    this.#deps.events.publish(sessionId, { type: 'rewind', toLength: target.toLength, at });
    const after = await this.#load(tenant, sessionId);
    const agent = await this.#agentOf(after.meta);
    return {
      logLength: after.log.length,
      requeued: requeue.length,
      queued: after.queue.length,
      cursor: foldCursor(after.log) ?? null,
      activeTools: foldActiveTools(this.#tools(agent), after.log),
    };
  }

  /** R31: a run that failed restarts from its start; its rows are re-made once each. */
  async restartRun(
    tenant: string,
    sessionId: string,
    input: { requestId?: string; format?: StepFormat; since?: number } = {},
  ): Promise<StepResult> {
    const stepped = await this.#locks.run(sessionId, async () => {
      const state = await this.#load(tenant, sessionId);
      // A redelivered restart answers its committed step; rewinding first would cut it (R33).
      if (input.requestId !== undefined) {
        const done = await this.#deps.store.getStep(sessionId, { requestId: input.requestId });
        if (done) return this.#replay(state, done);
      }
      const run = state.meta.run;
      const steps = await this.#deps.store.listSteps(sessionId);
      const first = run ? steps.find((s) => s.runId === run.runId) : undefined;
      if (first) await this.#rewind(tenant, sessionId, { beforeStepId: first.stepId });
      return this.#tracedPass(tenant, sessionId, 'retry', input.requestId);
    });
    return this.#answer(sessionId, stepped, input.since);
  }

  /** R32: a branch copies rows with their cursors and tool effects, never the queue. */
  async branch(tenant: string, sessionId: string, input: { atStepId?: string }): Promise<SessionMeta> {
    return this.#locks.run(sessionId, async () => {
      const state = await this.#load(tenant, sessionId);
      let log = state.log;
      let steps = await this.#deps.store.listSteps(sessionId);
      let calls = state.calls;
      let sites = state.sites;
      if (input.atStepId !== undefined) {
        const target = await this.#target(sessionId, { toStepId: input.atStepId });
        log = state.log.slice(0, target.toLength);
        steps = target.keep;
        calls = state.calls.filter((c) => !target.callRemoved(c));
        // As a rewind: the tool sites of calls the branch does not keep are not carried.
        const cut = new Set(state.calls.filter(target.callRemoved).map((c) => c.callId));
        sites = state.sites.filter((site) => {
          const bar = site.indexOf('|');
          return !(cut.has(site.slice(0, bar)) && site.startsWith('tool:', bar + 1));
        });
      }
      const meta: SessionMeta = {
        ...structuredClone(state.meta),
        sessionId: this.#newId('ses'),
        createdAt: new Date(this.#deps.clock.now()).toISOString(),
        steps: steps.length,
        branchOf: { sessionId, ...(input.atStepId === undefined ? {} : { atStepId: input.atStepId }) },
        // The branch's requests start as its origin's: the same provider cache key finds that cache.
        cacheKey: state.meta.cacheKey ?? cacheKey(sessionId),
        lastRequestEnd: Math.min(state.meta.lastRequestEnd ?? 0, log.length),
      };
      if (meta.run && meta.run.startLength > log.length) meta.run.open = false;
      await this.#deps.store.createSession(meta, structuredClone(log), structuredClone(steps), structuredClone(calls), {
        sites: [...sites],
        itemSeq: state.itemSeq,
      });
      const agent = await this.#agentOf(state.meta);
      await this.#deps.stepContextFor(agent)?.copySession?.(sessionId, meta.sessionId, meta.tenant);
      return meta;
    });
  }
}
