import { randomFillSync } from 'node:crypto';
import { loadLuaScript, packScriptArgument } from '@ctxflow/service-kit';
import type { Cluster, Redis } from 'ioredis';
import type {
  AgentRecord,
  CallRecord,
  LogEntry,
  LogFold,
  QueuedItem,
  SessionMeta,
  StepRecord,
} from '../../domain/model.ts';
import { RECORD_TRIM_EVERY } from '../request-retention.ts';
import type { StoreKeys } from './keys.ts';

/**
 * The session store's scripts (this folder's *.lua, their includes resolved by
 * loadLuaScript), in BullMQ's shape: each takes its keys and ONE packed argument,
 * a JSON object whose schema its header states and whose type is here, built by one
 * function per script (packScriptArgument). An absent field is nil in the script (JSON.stringify leaves
 * `undefined` out); no field is ever null. What the hot paths store (commit-step's step
 * record, meta and rows; enqueue's items; append-messages' meta and messages) and a branch's
 * log (create-session) follow the packed argument verbatim, as BullMQ passes a job's data
 * beside its packed options: their bytes are stored as sent, never decoded and encoded again.
 *
 * One file (a little over 400 lines): one argument type and one builder per script,
 * beside the command table that names them; split, each builder would sit apart from
 * the registration that gives its script a name.
 */
const lua = (file: string) => loadLuaScript(new URL(`./${file}`, import.meta.url));

/** An integer, a string, or an array (see each script's header). */
export type ScriptReply = number | string | (number | string)[];

/** The refusals the scripts answer with (see each script's header). */
export type StoreRefusal =
  | 'session_not_found'
  | 'session_exists'
  | 'replayed'
  | 'key_conflict'
  | 'log_changed'
  | 'item_not_queued'
  | 'version_changed'
  | 'bad_range'
  | 'prompt_unknown';

const REFUSALS: Record<number, StoreRefusal> = {
  [-1]: 'session_not_found',
  [-2]: 'session_exists',
  [-3]: 'replayed',
  [-4]: 'key_conflict',
  [-5]: 'log_changed',
  [-6]: 'item_not_queued',
  [-7]: 'version_changed',
  [-8]: 'bad_range',
  [-9]: 'prompt_unknown',
};

/**
 * THE mapping of a script's reply: a negative integer is a refusal (nothing was
 * written); anything else is the script's answer. An unknown code is a bug.
 */
export function scriptOutcome(reply: ScriptReply): { refusal: StoreRefusal } | { ok: ScriptReply } {
  if (typeof reply === 'number' && reply < 0) {
    const refusal = REFUSALS[reply];
    if (!refusal) throw new Error(`session store script answered an unknown code ${reply}`);
    return { refusal };
  }
  return { ok: reply };
}

/** A step record as stored: its system prompt by id in the session's `prompts` hash (keys.ts). */
export type StoredStep = Omit<StepRecord, 'system'> & { system?: string; systemRef?: string };

/** The stored form of a step record whose system prompt has id `promptId` ('' keeps the text in it). */
export function storedStep(step: StepRecord, promptId: string): StoredStep {
  if (promptId === '') return step;
  const { system: _, ...rest } = step;
  return { ...rest, systemRef: promptId };
}

/** Random bytes for version nonces, drawn 8 at a time (one random fill per 512 commits). */
const noncePool = Buffer.alloc(4096);
let nonceOffset = noncePool.length;

/** 16 random hex digits: the second part of the version a step commit issues (commit-step.lua). */
export function versionNonce(): string {
  if (nonceOffset + 8 > noncePool.length) {
    randomFillSync(noncePool);
    nonceOffset = 0;
  }
  nonceOffset += 8;
  return noncePool.toString('hex', nonceOffset - 8, nonceOffset);
}

/** The `counters` fields of the meta's counters a step commit writes apart (commit-step.lua). */
export const COUNTERS = ['steps', 'stepAt', 'requestEnd', 'fold'] as const;

/** The meta as stored: its JSON, with the counters the `counters` hash holds (values of COUNTERS) over it. */
export function storedMeta(json: string, counters: (string | null | undefined)[]): SessionMeta {
  const meta = JSON.parse(json) as SessionMeta;
  const [steps, stepAt, requestEnd, fold] = counters;
  if (steps !== null && steps !== undefined) meta.steps = Number(steps);
  if (stepAt !== null && stepAt !== undefined) meta.lastStepAt = Number(stepAt);
  if (requestEnd !== null && requestEnd !== undefined) meta.lastRequestEnd = Number(requestEnd);
  if (fold !== null && fold !== undefined) meta.logFold = JSON.parse(fold) as LogFold;
  return meta;
}

/** The calls hash as HGETALL's flat field, value list; a value is `<order> <CallRecord JSON>` (put-call.lua). */
export function parseCalls(flat: readonly string[]): CallRecord[] {
  const values: string[] = [];
  for (let i = 1; i < flat.length; i += 2) values.push(flat[i]!);
  return values
    .map((value) => {
      const space = value.indexOf(' ');
      return { order: Number(value.slice(0, space)), call: JSON.parse(value.slice(space + 1)) as CallRecord };
    })
    .sort((a, b) => a.order - b.order)
    .map((entry) => entry.call);
}

/** What a step inside a run that kept its prefix changes of the meta (commit-step.lua `counters`). */
export interface StepCounters {
  steps: number;
  lastStepAt: number;
  lastRequestEnd: number;
  logFold: LogFold | undefined;
}

/** commit-step.lua's argument (its header says what each field does there). */
export interface CommitStepArgs {
  /** The log length the pass was computed on. */
  logLength: number;
  /** The session version the pass was computed on; absent for none. */
  version?: string | undefined;
  /** The step record as stored (storedStep). */
  step: StoredStep;
  /** The meta whole, or its counters alone (only with a `version` that names one). */
  meta: { whole: SessionMeta } | { counters: StepCounters };
  /** The step's system prompt by id, with its text unless the session's last commit stored or used it. */
  prompt?: { id: string; text?: string | undefined } | undefined;
  /** The drain is the whole queue of the state at `version`. */
  wholeQueue: boolean;
  /** A random nonce for the next version; absent: the server's time. */
  nonce?: string | undefined;
  /** Ids of the queued items the rows deliver. */
  drain: readonly string[];
  rows: readonly LogEntry[];
  /** With an outbox: the indexes in `rows` of the entries it takes; absent: every one. */
  outboxRows?: readonly number[] | undefined;
}

/**
 * commit-step.lua's ARGV: the packed argument, then the step record, the meta ('' for none), the
 * log fold of a counters-only commit ('' for none) and the rows, as stored.
 */
export function commitStepArgs(ttlMs: number, a: CommitStepArgs): string[] {
  const requestId = a.step.requestId;
  const packed = packScriptArgument({
    ttlMs,
    logLength: a.logLength,
    version: a.version,
    stepId: a.step.stepId,
    requestId: requestId === '' ? undefined : requestId,
    counters:
      'counters' in a.meta
        ? {
            steps: String(a.meta.counters.steps),
            stepAt: String(a.meta.counters.lastStepAt),
            requestEnd: String(a.meta.counters.lastRequestEnd),
          }
        : undefined,
    prompt: a.prompt,
    nonce: a.nonce,
    // The whole queue at a version: its number of items is all the script needs.
    drain: a.wholeQueue && a.version !== undefined && a.version !== '' ? a.drain.length : a.drain,
    // ARGV indexes: the rows follow the packed argument, the step record, the meta and the fold.
    outbox: a.outboxRows?.map((i) => i + 5),
  });
  const meta = 'whole' in a.meta ? JSON.stringify(a.meta.whole) : '';
  const fold = 'counters' in a.meta ? a.meta.counters.logFold : undefined;
  const foldJson = fold === undefined ? '' : JSON.stringify(fold);
  return [packed, JSON.stringify(a.step), meta, foldJson, ...a.rows.map((row) => JSON.stringify(row))];
}

/** JSON of a queued item with `itemId` as its LAST property (includes/queue-element.lua reads it at the end). */
export function encodeQueued(item: QueuedItem): string {
  const { itemId, ...rest } = item;
  return JSON.stringify({ ...rest, itemId });
}

/** create-session.lua's argument. */
export interface CreateSessionArgs {
  meta: SessionMeta;
  log: readonly LogEntry[];
  /** Steps as stored (storedStep), with the prompts they name by id. */
  steps: readonly StoredStep[];
  calls: readonly CallRecord[];
  sites: readonly string[];
  /** The last item number already used (0: none). */
  itemSeq: number;
  /** Prompt id -> text, for every id the steps name. */
  prompts: ReadonlyMap<string, string>;
}

/** create-session.lua's ARGV: the packed argument, then the log. */
export function createSessionArgs(ttlMs: number, a: CreateSessionArgs): string[] {
  const packed = packScriptArgument({
    ttlMs,
    meta: JSON.stringify(a.meta),
    steps: a.steps.map((step) => ({
      id: step.stepId,
      requestId: step.requestId === '' ? undefined : step.requestId,
      step: JSON.stringify(step),
    })),
    calls: a.calls.map((call) => ({ id: call.callId, call: JSON.stringify(call) })),
    sites: a.sites,
    itemSeq: a.itemSeq,
    prompts: [...a.prompts].map(([id, text]) => ({ id, text })),
  });
  return [packed, ...a.log.map((entry) => JSON.stringify(entry))];
}

/** enqueue.lua's argument. */
export interface EnqueueArgs {
  /** An app request key with the items' fingerprint, or the call site that records them. */
  dedupe?: { key: string; fingerprint: string } | { site: string } | undefined;
  /** The JSON of each NewQueuedItem, in queue order. */
  items: readonly string[];
  /** App request keys the session keeps (request-retention.ts). */
  keysKept: number;
}

/** enqueue.lua's ARGV: the packed argument, then the items as stored (without their ids). */
export function enqueueArgs(ttlMs: number, a: EnqueueArgs): string[] {
  const packed = packScriptArgument({ ttlMs, dedupe: a.dedupe, keysKept: a.keysKept, trimEvery: RECORD_TRIM_EVERY });
  return [packed, ...a.items];
}

/** append-messages.lua's argument. */
export interface AppendMessagesArgs {
  /** The meta to write with the messages; absent keeps it. */
  meta?: SessionMeta | undefined;
  /** The version the messages were validated on; absent for none. */
  version?: string | undefined;
  /** Messages without their seq (the script gives each its index). */
  messages: readonly Omit<Extract<LogEntry, { type: 'message' }>, 'seq'>[];
  /** Call records written with the messages (as putCall writes them), and how many a session keeps. */
  calls?: { records: readonly CallRecord[]; kept: number } | undefined;
}

/** append-messages.lua's ARGV: the packed argument, then the meta ('' to keep it) and the messages as stored. */
export function appendMessagesArgs(ttlMs: number, a: AppendMessagesArgs): string[] {
  const calls = a.calls === undefined || a.calls.records.length === 0 ? undefined : a.calls;
  const packed = packScriptArgument({
    ttlMs,
    version: a.version,
    ...(calls === undefined
      ? {}
      : {
          calls: calls.records.map((call) => ({ id: call.callId, call: JSON.stringify(call) })),
          callsKept: calls.kept,
          trimEvery: RECORD_TRIM_EVERY,
        }),
  });
  const meta = a.meta === undefined ? '' : JSON.stringify(a.meta);
  return [packed, meta, ...a.messages.map((message) => JSON.stringify(message))];
}

/** rewind.lua's argument. */
export interface RewindArgs {
  logLength: number;
  toLength: number;
  meta: SessionMeta;
  requeue: readonly QueuedItem[];
  dropItems: readonly string[];
  dropCalls: readonly string[];
  dropSteps: readonly string[];
}

export function rewindArgs(ttlMs: number, a: RewindArgs): string {
  return packScriptArgument({
    ttlMs,
    logLength: a.logLength,
    toLength: a.toLength,
    meta: JSON.stringify(a.meta),
    requeue: a.requeue.map(encodeQueued),
    dropItems: a.dropItems,
    dropCalls: a.dropCalls,
    dropSteps: a.dropSteps,
  });
}

export function putMetaArgs(ttlMs: number, meta: SessionMeta): string {
  return packScriptArgument({ ttlMs, meta: JSON.stringify(meta) });
}

/** put-call.lua's argument; `callsKept`: the call records the session keeps (request-retention.ts). */
export function putCallArgs(ttlMs: number, call: CallRecord, callsKept: number): string {
  return packScriptArgument({
    ttlMs,
    callId: call.callId,
    call: JSON.stringify(call),
    callsKept,
    trimEvery: RECORD_TRIM_EVERY,
  });
}

/** replace-agent.lua's argument. */
export function replaceAgentArgs(agent: AgentRecord, expectedVersion: number): string {
  return packScriptArgument({
    expected: String(expectedVersion),
    version: String(agent.version),
    agent: JSON.stringify(agent),
  });
}

/** load-session.lua's reply: meta, from, log, queue, calls (flat), sites, counters fields, request ids. */
export type LoadReply = [string, number, string[], string[], string[], string[], (string | null)[], string[]];

type Command = (...args: string[]) => Promise<unknown>;

/** The scripts' ioredis commands: name -> file and number of keys. */
const COMMANDS = {
  ctxCreateSession: { file: 'create-session.lua', keys: 10 },
  ctxEnqueue: { file: 'enqueue.lua', keys: 10 },
  ctxAppendMessages: { file: 'append-messages.lua', keys: 10 },
  ctxCommitStep: { file: 'commit-step.lua', keys: 10 },
  // commit-step.lua with the session's row outbox stream as KEYS[11] (events and receipts).
  ctxCommitStepOutbox: { file: 'commit-step.lua', keys: 11 },
  ctxRewind: { file: 'rewind.lua', keys: 10 },
  ctxPutMeta: { file: 'put-meta.lua', keys: 10 },
  ctxPutCall: { file: 'put-call.lua', keys: 10 },
  ctxLoadSession: { file: 'load-session.lua', keys: 10 },
  ctxKeyFingerprint: { file: 'key-fingerprint.lua', keys: 2 },
  ctxReplaceAgent: { file: 'replace-agent.lua', keys: 1 },
  ctxTrimRequests: { file: 'trim-requests.lua', keys: 2 },
  ctxStepAt: { file: 'step-at.lua', keys: 1 },
} as const;
type CommandName = keyof typeof COMMANDS;

/**
 * One method per script: its keys (the session's: keys.ts SESSION_KEY_ORDER) and the
 * packed argument its builder makes; the session scripts that write get the retention
 * (includes/expire-session.lua). Commands are defined once per client (defineCommand
 * sends EVALSHA and falls back to EVAL on NOSCRIPT: a restarted Redis).
 */
export class SessionScripts {
  readonly #commands: Record<CommandName, Command>;
  readonly #keys: StoreKeys;
  readonly #ttlMs: number;

  constructor(client: Redis | Cluster, keys: StoreKeys, ttlMs: number) {
    const defined = client as unknown as Partial<Record<CommandName, Command>>;
    for (const [name, { file, keys: numberOfKeys }] of Object.entries(COMMANDS)) {
      if (typeof defined[name as CommandName] !== 'function') {
        client.defineCommand(name, { numberOfKeys, lua: lua(file) });
      }
    }
    this.#commands = client as unknown as Record<CommandName, Command>;
    this.#keys = keys;
    this.#ttlMs = ttlMs;
  }

  #session(name: CommandName, sessionId: string, argv: string | readonly string[]): Promise<ScriptReply> {
    const keys = this.#keys.sessionList(sessionId);
    return this.#commands[name](...keys, ...(typeof argv === 'string' ? [argv] : argv)) as Promise<ScriptReply>;
  }

  createSession(sessionId: string, args: CreateSessionArgs): Promise<ScriptReply> {
    return this.#session('ctxCreateSession', sessionId, createSessionArgs(this.#ttlMs, args));
  }

  enqueue(sessionId: string, args: EnqueueArgs): Promise<ScriptReply> {
    return this.#session('ctxEnqueue', sessionId, enqueueArgs(this.#ttlMs, args));
  }

  appendMessages(sessionId: string, args: AppendMessagesArgs): Promise<ScriptReply> {
    return this.#session('ctxAppendMessages', sessionId, appendMessagesArgs(this.#ttlMs, args));
  }

  /** `outboxKey`: the session's row outbox stream, which the commit's rows are also added to. */
  commitStep(sessionId: string, args: CommitStepArgs, outboxKey?: string): Promise<ScriptReply> {
    const argv = commitStepArgs(this.#ttlMs, args);
    if (outboxKey === undefined) return this.#session('ctxCommitStep', sessionId, argv);
    const keys = this.#keys.sessionList(sessionId);
    return this.#commands.ctxCommitStepOutbox(...keys, outboxKey, ...argv) as Promise<ScriptReply>;
  }

  rewind(sessionId: string, args: RewindArgs): Promise<ScriptReply> {
    return this.#session('ctxRewind', sessionId, rewindArgs(this.#ttlMs, args));
  }

  putMeta(meta: SessionMeta): Promise<ScriptReply> {
    return this.#session('ctxPutMeta', meta.sessionId, putMetaArgs(this.#ttlMs, meta));
  }

  putCall(sessionId: string, call: CallRecord, callsKept: number): Promise<ScriptReply> {
    return this.#session('ctxPutCall', sessionId, putCallArgs(this.#ttlMs, call, callsKept));
  }

  /** A consistent read of the session (`window`: its log window only) and the `counters` fields named. */
  loadSession(sessionId: string, args: { window: boolean; fields: readonly string[] }): Promise<LoadReply | null> {
    const packed = packScriptArgument({ window: args.window ? true : undefined, fields: args.fields });
    return this.#commands.ctxLoadSession(...this.#keys.sessionList(sessionId), packed) as Promise<LoadReply | null>;
  }

  keyFingerprint(sessionId: string, key: string): Promise<string | null> {
    const keys = this.#keys.session(sessionId);
    return this.#commands.ctxKeyFingerprint(keys.meta, keys.keys, packScriptArgument({ key })) as Promise<
      string | null
    >;
  }

  /** Deletes a session's request-id records past the last `keep` (request-retention.ts); the number deleted. */
  trimRequests(requestsKey: string, stepsKey: string, keep: number): Promise<number> {
    return this.#commands.ctxTrimRequests(requestsKey, stepsKey, packScriptArgument({ keep })) as Promise<number>;
  }

  /** The stored JSON of the surviving step of ordinal `ordinal`; null when none has it. */
  stepAt(stepsKey: string, ordinal: number): Promise<string | null> {
    return this.#commands.ctxStepAt(stepsKey, packScriptArgument({ ordinal })) as Promise<string | null>;
  }

  replaceAgent(agent: AgentRecord, expectedVersion: number): Promise<ScriptReply> {
    const key = this.#keys.agent(agent.agentId);
    return this.#commands.ctxReplaceAgent(key, replaceAgentArgs(agent, expectedVersion)) as Promise<ScriptReply>;
  }
}
