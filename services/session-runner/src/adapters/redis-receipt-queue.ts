import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { CtxflowError } from '@ctxflow/contracts';
import type { DeliveryReceipt } from '@ctxflow/feeds';
import type { Cluster, Redis } from 'ioredis';
import { type DeadReceipt, type QueuedReceipt, type ReceiptQueue, receiptId } from '../ports/receipt-queue.ts';
import { RECEIPT_SENT_KEEP_MS } from './memory-receipt-queue.ts';

/**
 * The receipt queue on Redis, standalone or Cluster. Five keys share the hash tag
 * `{receipts}` (one slot, so each script may touch them all):
 * - `<prefix>:{receipts}:due`: sorted set, receipt id -> when it is due (ms; a taken
 *   receipt's score is the end of its lease);
 * - `<prefix>:{receipts}:receipts`: hash, receipt id -> the DeliveryReceipt JSON;
 * - `<prefix>:{receipts}:states`: hash, receipt id -> `{attempts, lease?, error?, deadAt?}`;
 * - `<prefix>:{receipts}:dead`: sorted set, the dead-lettered ids -> when (ms);
 * - `<prefix>:{receipts}:sent`: sorted set, ids sent within the keep time -> when (ms).
 * Times are the Redis server's (TIME), so replicas with skewed clocks agree on leases.
 * Every receipt of the stack is in that one slot: a Cluster spreads none of this load.
 */
export interface RedisReceiptQueueOptions {
  /** Key prefix (CTXFLOW_REDIS_PREFIX); default `ctx`. */
  prefix?: string;
  /** How long a sent receipt's id is remembered (ms); default a day. */
  sentKeepMs?: number;
}

type Scripts = {
  ctxReceiptEnqueue: (...args: string[]) => Promise<number>;
  ctxReceiptTake: (...args: string[]) => Promise<string[]>;
  ctxReceiptSettle: (...args: string[]) => Promise<number>;
  ctxReceiptReplay: (...args: string[]) => Promise<string[]>;
};

const SCRIPTS: Record<keyof Scripts, string> = {
  ctxReceiptEnqueue: 'receipt-enqueue.lua',
  ctxReceiptTake: 'receipt-take.lua',
  ctxReceiptSettle: 'receipt-settle.lua',
  ctxReceiptReplay: 'receipt-replay.lua',
};

/** Receipts per enqueue script call at most (the script's ARGV stays small). */
const ENQUEUE_CHUNK = 200;

interface State {
  attempts: number;
  error?: string;
  deadAt?: number;
}

export class RedisReceiptQueue implements ReceiptQueue {
  readonly #client: Redis | Cluster;
  readonly #scripts: Scripts;
  readonly #keys: string[];
  readonly #keepMs: string;
  readonly #listeners: (() => void)[] = [];

  constructor(client: Redis | Cluster, options: RedisReceiptQueueOptions = {}) {
    const prefix = options.prefix ?? 'ctx';
    if (prefix.includes('{') || prefix.includes('}')) {
      throw new Error(`the receipt queue key prefix must not contain braces: ${JSON.stringify(prefix)}`);
    }
    this.#client = client;
    this.#keys = ['due', 'receipts', 'states', 'dead', 'sent'].map((name) => `${prefix}:{receipts}:${name}`);
    this.#keepMs = String(options.sentKeepMs ?? RECEIPT_SENT_KEEP_MS);
    const defined = client as unknown as Partial<Scripts>;
    for (const [name, file] of Object.entries(SCRIPTS)) {
      if (typeof defined[name as keyof Scripts] !== 'function') {
        const lua = readFileSync(new URL(`./redis/${file}`, import.meta.url), 'utf8');
        client.defineCommand(name, { numberOfKeys: this.#keys.length, lua });
      }
    }
    this.#scripts = client as unknown as Scripts;
  }

  async enqueue(receipts: readonly DeliveryReceipt[]): Promise<void> {
    let added = 0;
    for (let i = 0; i < receipts.length; i += ENQUEUE_CHUNK) {
      const args = receipts.slice(i, i + ENQUEUE_CHUNK).flatMap((r) => [receiptId(r), JSON.stringify(r)]);
      added += await this.#guard(() => this.#scripts.ctxReceiptEnqueue(...this.#keys, this.#keepMs, ...args));
    }
    if (added > 0) for (const listener of this.#listeners) queueMicrotask(listener);
  }

  async take(max: number, leaseMs: number): Promise<QueuedReceipt[]> {
    const lease = randomUUID();
    const flat = await this.#guard(() =>
      this.#scripts.ctxReceiptTake(...this.#keys, String(max), String(leaseMs), lease),
    );
    const out: QueuedReceipt[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) {
      out.push({ id: flat[i]!, receipt: JSON.parse(flat[i + 1]!), attempts: Number(flat[i + 2]), lease });
    }
    return out;
  }

  async complete(entry: QueuedReceipt): Promise<void> {
    await this.#settle('complete', entry, this.#keepMs, '');
  }

  async retry(entry: QueuedReceipt, delayMs: number, error: string): Promise<boolean> {
    return (await this.#settle('retry', entry, String(Math.max(0, Math.round(delayMs))), error)) === 1;
  }

  async release(entry: QueuedReceipt): Promise<void> {
    await this.#settle('release', entry, '0', '');
  }

  async deadLetter(entry: QueuedReceipt, error: string): Promise<boolean> {
    return (await this.#settle('dead', entry, '0', error)) === 1;
  }

  async deadLetters(): Promise<DeadReceipt[]> {
    const [, receiptsKey, statesKey, deadKey] = this.#keys as [string, string, string, string];
    const flat = await this.#guard(() => this.#client.zrange(deadKey, '0', '-1'));
    if (flat.length === 0) return [];
    const [receipts, states] = await this.#guard(() =>
      Promise.all([this.#client.hmget(receiptsKey, ...flat), this.#client.hmget(statesKey, ...flat)]),
    );
    const out: DeadReceipt[] = [];
    for (const [i, id] of flat.entries()) {
      const receipt = receipts[i];
      const state = states[i];
      if (receipt == null || state == null) continue; // completed meanwhile
      out.push(deadOf(id, receipt, state));
    }
    return out;
  }

  async deadLetterCount(): Promise<number> {
    return this.#guard(() => this.#client.zcard(this.#keys[3]!));
  }

  async replay(ids?: readonly string[]): Promise<DeadReceipt[]> {
    const flat = await this.#guard(() => this.#scripts.ctxReceiptReplay(...this.#keys, ...(ids ?? [])));
    const out: DeadReceipt[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) out.push(deadOf(flat[i]!, flat[i + 1]!, flat[i + 2]!));
    if (out.length > 0) for (const listener of this.#listeners) queueMicrotask(listener);
    return out;
  }

  onEnqueue(listener: () => void): void {
    this.#listeners.push(listener);
  }

  #settle(op: string, entry: QueuedReceipt, ms: string, error: string): Promise<number> {
    return this.#guard(() => this.#scripts.ctxReceiptSettle(...this.#keys, op, entry.id, entry.lease, ms, error));
  }

  async #guard<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (cause) {
      throw new CtxflowError('store_unavailable', 'the receipt queue did not answer', { cause });
    }
  }
}

function deadOf(id: string, receipt: string, stateJson: string): DeadReceipt {
  const state = JSON.parse(stateJson) as State;
  return {
    id,
    receipt: JSON.parse(receipt) as DeliveryReceipt,
    attempts: state.attempts,
    error: state.error ?? '',
    at: state.deadAt ?? 0,
  };
}
