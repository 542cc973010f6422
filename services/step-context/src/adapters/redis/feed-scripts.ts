import { loadLuaScript, packScriptArgument } from '@ctxflow/service-kit';
import type { Cluster, Redis } from 'ioredis';

/**
 * The feed streams' scripts (this folder's *.lua, their includes resolved by
 * loadLuaScript), in BullMQ's shape: each takes its keys and ONE packed argument,
 * a JSON object whose schema its header states and whose type is here, built by one
 * function per script (packScriptArgument). An absent field is nil in the script (JSON.stringify leaves
 * `undefined` out); no field is ever null.
 */
const lua = (file: string) => loadLuaScript(new URL(`./${file}`, import.meta.url));

/** One record of apply-updates.lua: a poison record has its offset alone. */
export type ApplyUpdatesRecord =
  | { offset?: string | undefined }
  | {
      /** Canonical decimal; absent for a plain append. */
      offset?: string | undefined;
      id: string;
      /** The ticket key `<source>:<ticket>`. */
      key: string;
      version?: number | undefined;
      /** occurredAt in epoch ms, when it parses. */
      at?: number | undefined;
      /** The update's JSON. */
      update: string;
      traceparent?: string | undefined;
      /** KEYS indexes (1-based): the source's seq, then each candidate stream. */
      layout: readonly number[];
    };

/** apply-updates.lua's argument. */
export interface ApplyUpdatesArgs {
  /** The partition's offsets field; absent for plain appends. */
  field?: string | undefined;
  ttlMs: number;
  /** Epoch ms against which followers' expiries are judged. */
  now: number;
  /** KEYS[1] is the source's own offsets hash (Redis Cluster). */
  ownOffsets: boolean;
  /** Write every listed stream, followed or not (plain appends). */
  all: boolean;
  /** How many of a source's last stored ids dedupe. */
  window: number;
  records: readonly ApplyUpdatesRecord[];
}

export function applyUpdatesArgs(a: ApplyUpdatesArgs): string {
  return packScriptArgument({
    field: a.field,
    ttlMs: a.ttlMs,
    now: String(a.now),
    ownOffsets: a.ownOffsets ? true : undefined,
    all: a.all ? true : undefined,
    window: a.window,
    records: a.records.map((r) =>
      'id' in r
        ? {
            offset: r.offset,
            id: r.id,
            key: r.key,
            version: r.version === undefined ? undefined : String(r.version),
            at: r.at === undefined ? undefined : String(r.at),
            update: r.update,
            trace: r.traceparent === '' ? undefined : r.traceparent,
            layout: r.layout,
          }
        : { offset: r.offset },
    ),
  });
}

/** read-streams.lua's argument: per stream its digest and the seq to read after. */
export interface ReadStreamsArgs {
  count: number;
  streams: readonly { digest: string; after: number }[];
}

export function readStreamsArgs(a: ReadStreamsArgs): string {
  return packScriptArgument({
    count: a.count,
    streams: a.streams.map((s) => ({ digest: s.digest, after: String(s.after) })),
  });
}

/** A partition's stored consumption as rebind-partition.lua compares and writes it. */
export interface PartitionFields {
  offset?: string | undefined;
  topicId?: string | undefined;
}

export function recordOffsetArgs(field: string, offset: string): string {
  return packScriptArgument({ field, offset });
}

export function rebindPartitionArgs(field: string, expected: PartitionFields, next: PartitionFields): string {
  return packScriptArgument({ field, expected, next });
}

/** read-streams.lua's reply: [place, entries, place, entries, ...], entries as XRANGE answers them. */
export type ReadStreamsReply = (number | [string, string[]][])[];

type Command = (...args: (string | number)[]) => Promise<unknown>;

/** The scripts' ioredis commands: name -> file and number of keys (undefined: given per call). */
const COMMANDS = {
  ctxApplyUpdates: { file: 'apply-updates.lua', keys: undefined },
  ctxReadStreams: { file: 'read-streams.lua', keys: 1 },
  ctxRecordOffset: { file: 'record-offset.lua', keys: 1 },
  ctxRebindPartition: { file: 'rebind-partition.lua', keys: 1 },
} as const;
type CommandName = keyof typeof COMMANDS;

/**
 * One method per script: its keys and the packed argument its builder makes.
 * Commands are defined once per client (defineCommand sends EVALSHA and falls back
 * to EVAL on NOSCRIPT: a restarted Redis).
 */
export class FeedScripts {
  readonly #commands: Record<CommandName, Command>;

  constructor(client: Redis | Cluster) {
    const defined = client as unknown as Partial<Record<CommandName, Command>>;
    for (const [name, { file, keys }] of Object.entries(COMMANDS)) {
      if (typeof defined[name as CommandName] !== 'function') {
        client.defineCommand(name, keys === undefined ? { lua: lua(file) } : { numberOfKeys: keys, lua: lua(file) });
      }
    }
    this.#commands = client as unknown as Record<CommandName, Command>;
  }

  /** apply-updates.lua over `keys` (KEYS[1] the offsets hash, then what the layouts name). */
  applyUpdates(keys: readonly string[], args: ApplyUpdatesArgs): Promise<number[]> {
    return this.#commands.ctxApplyUpdates(keys.length, ...keys, applyUpdatesArgs(args)) as Promise<number[]>;
  }

  /** read-streams.lua: `last` is the source's last-seq hash (its tag names the streams). */
  readStreams(last: string, args: ReadStreamsArgs): Promise<ReadStreamsReply> {
    return this.#commands.ctxReadStreams(last, readStreamsArgs(args)) as Promise<ReadStreamsReply>;
  }

  /** record-offset.lua: 1 stored, 0 at or below the stored offset. */
  recordOffset(offsets: string, field: string, offset: string): Promise<number> {
    return this.#commands.ctxRecordOffset(offsets, recordOffsetArgs(field, offset)) as Promise<number>;
  }

  /** rebind-partition.lua: 1 written, 0 when what is stored is not `expected`. */
  rebindPartition(offsets: string, field: string, expected: PartitionFields, next: PartitionFields): Promise<number> {
    return this.#commands.ctxRebindPartition(offsets, rebindPartitionArgs(field, expected, next)) as Promise<number>;
  }
}
