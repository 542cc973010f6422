import { loadLuaScript } from '@ctxflow/service-kit';
import type { Cluster, Redis } from 'ioredis';
import type { LogEntry, SessionMeta, StepRecord } from '../../domain/model.ts';
import type { StoreKeys } from './keys.ts';

/**
 * The session store's scripts (this folder's *.lua, their includes resolved by
 * loadLuaScript), in BullMQ's shape: each takes its keys and ONE packed argument,
 * a JSON object whose schema its header states and whose type is here, built by one
 * function per script. An absent field is nil in the script (JSON.stringify leaves
 * `undefined` out); no field is ever null.
 */
const lua = (file: string) => loadLuaScript(new URL(`./${file}`, import.meta.url));

/** An integer, a string, or an array (see each script's header). */
export type ScriptReply = number | string | (number | string)[];

/** A step record as stored: its system prompt by id in the session's `prompts` hash (keys.ts). */
export type StoredStep = Omit<StepRecord, 'system'> & { system?: string; systemRef?: string };

/** The stored form of a step record whose system prompt has id `promptId` ('' keeps the text in it). */
export function storedStep(step: StepRecord, promptId: string): StoredStep {
  if (promptId === '') return step;
  const { system: _, ...rest } = step;
  return { ...rest, systemRef: promptId };
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
  meta: { whole: SessionMeta } | { counters: { steps: number; lastStepAt: number; lastRequestEnd: number } };
  /** The step's system prompt by id, with its text unless the session's last commit stored or used it. */
  prompt?: { id: string; text?: string | undefined } | undefined;
  /** The drain is the whole queue of the state at `version`. */
  wholeQueue: boolean;
  /** A random nonce for the next version; absent: the server's time. */
  nonce?: string | undefined;
  /** Ids of the queued items the rows deliver. */
  drain: readonly string[];
  rows: readonly LogEntry[];
}

/** commit-step.lua's packed argument. */
export function commitStepArgs(ttlMs: number, a: CommitStepArgs): string {
  const requestId = a.step.requestId;
  return JSON.stringify({
    ttlMs,
    logLength: a.logLength,
    version: a.version,
    stepId: a.step.stepId,
    step: JSON.stringify(a.step),
    requestId: requestId === '' ? undefined : requestId,
    meta: 'whole' in a.meta ? JSON.stringify(a.meta.whole) : undefined,
    counters:
      'counters' in a.meta
        ? {
            steps: String(a.meta.counters.steps),
            stepAt: String(a.meta.counters.lastStepAt),
            requestEnd: String(a.meta.counters.lastRequestEnd),
          }
        : undefined,
    prompt: a.prompt,
    wholeQueue: a.wholeQueue ? true : undefined,
    nonce: a.nonce,
    drain: a.drain,
    rows: a.rows.map((row) => JSON.stringify(row)),
  });
}

type Command = (...args: string[]) => Promise<ScriptReply>;

/** The scripts' ioredis commands: name -> file and number of keys. */
const COMMANDS = {
  ctxCommitStep: { file: 'commit-step.lua', keys: 10 },
} as const;
type CommandName = keyof typeof COMMANDS;

/**
 * One method per script: the session's keys (keys.ts SESSION_KEY_ORDER) and the packed
 * argument its builder makes. Commands are defined once per client (defineCommand sends
 * EVALSHA and falls back to EVAL on NOSCRIPT: a restarted Redis).
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

  commitStep(sessionId: string, args: CommitStepArgs): Promise<ScriptReply> {
    return this.#commands.ctxCommitStep(...this.#keys.sessionList(sessionId), commitStepArgs(this.#ttlMs, args));
  }
}
