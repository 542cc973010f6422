import { randomUUID } from 'node:crypto';
import type { DeliveryReceipt } from '@ctxflow/feeds';
import { type Clock, systemClock } from '../ports/clock.ts';
import { type DeadReceipt, type QueuedReceipt, type ReceiptQueue, receiptId } from '../ports/receipt-queue.ts';

export interface MemoryReceiptQueueOptions {
  /** How long a sent receipt's id is remembered, so a repeated enqueue adds nothing (ms); default a day. */
  sentKeepMs?: number;
  clock?: Clock;
}

interface Entry {
  receipt: DeliveryReceipt;
  attempts: number;
  due: number;
  lease?: string;
  error?: string;
  /** Set while dead-lettered: when. */
  deadAt?: number;
}

/** The sent ids remembered: a day by default. */
export const RECEIPT_SENT_KEEP_MS = 24 * 60 * 60 * 1000;

/**
 * The receipt queue in process (the embedded default, a runner without Redis):
 * durable as long as the process lives, as the rest of the embedded state.
 */
export class MemoryReceiptQueue implements ReceiptQueue {
  readonly #entries = new Map<string, Entry>();
  /** Sent id -> when, in sending order. */
  readonly #sent = new Map<string, number>();
  readonly #listeners: (() => void)[] = [];
  /** Entries with `deadAt`. */
  #dead = 0;
  readonly #keepMs: number;
  readonly #clock: Clock;

  constructor(options: MemoryReceiptQueueOptions = {}) {
    this.#keepMs = options.sentKeepMs ?? RECEIPT_SENT_KEEP_MS;
    this.#clock = options.clock ?? systemClock;
  }

  async enqueue(receipts: readonly DeliveryReceipt[]): Promise<void> {
    this.#forget();
    const now = this.#clock.now();
    let added = false;
    for (const receipt of receipts) {
      const id = receiptId(receipt);
      if (this.#entries.has(id) || this.#sent.has(id)) continue;
      this.#entries.set(id, { receipt: structuredClone(receipt), attempts: 0, due: now });
      added = true;
    }
    if (added) for (const listener of this.#listeners) queueMicrotask(listener);
  }

  async take(max: number, leaseMs: number): Promise<QueuedReceipt[]> {
    const now = this.#clock.now();
    const due = [...this.#entries]
      .filter(([, e]) => e.deadAt === undefined && e.due <= now)
      .sort((a, b) => a[1].due - b[1].due)
      .slice(0, max);
    return due.map(([id, entry]) => {
      entry.lease = randomUUID();
      entry.due = now + leaseMs;
      return { id, receipt: structuredClone(entry.receipt), attempts: entry.attempts, lease: entry.lease };
    });
  }

  async complete(entry: QueuedReceipt): Promise<void> {
    if (this.#entries.get(entry.id)?.deadAt !== undefined) this.#dead -= 1;
    this.#entries.delete(entry.id);
    this.#sent.delete(entry.id);
    this.#sent.set(entry.id, this.#clock.now());
    this.#forget();
  }

  async retry(entry: QueuedReceipt, delayMs: number, error: string): Promise<boolean> {
    const held = this.#held(entry);
    if (!held) return false;
    held.attempts += 1;
    held.error = error;
    held.due = this.#clock.now() + delayMs;
    delete held.lease;
    return true;
  }

  async release(entry: QueuedReceipt): Promise<void> {
    const held = this.#held(entry);
    if (!held) return;
    held.due = this.#clock.now();
    delete held.lease;
  }

  async deadLetter(entry: QueuedReceipt, error: string): Promise<boolean> {
    const held = this.#held(entry);
    if (!held) return false;
    held.attempts += 1;
    held.error = error;
    held.deadAt = this.#clock.now();
    delete held.lease;
    this.#dead += 1;
    return true;
  }

  async deadLetterCount(): Promise<number> {
    return this.#dead;
  }

  async deadLetters(): Promise<DeadReceipt[]> {
    return [...this.#entries]
      .filter(([, e]) => e.deadAt !== undefined)
      .sort((a, b) => a[1].deadAt! - b[1].deadAt!)
      .map(([id, e]) => ({
        id,
        receipt: structuredClone(e.receipt),
        attempts: e.attempts,
        error: e.error ?? '',
        at: e.deadAt!,
      }));
  }

  async replay(ids?: readonly string[]): Promise<DeadReceipt[]> {
    const chosen = ids === undefined ? undefined : new Set(ids);
    const moved = (await this.deadLetters()).filter((d) => chosen === undefined || chosen.has(d.id));
    const now = this.#clock.now();
    for (const dead of moved) {
      const entry = this.#entries.get(dead.id)!;
      delete entry.deadAt;
      delete entry.error;
      entry.attempts = 0;
      entry.due = now;
    }
    this.#dead -= moved.length;
    if (moved.length > 0) for (const listener of this.#listeners) queueMicrotask(listener);
    return moved;
  }

  onEnqueue(listener: () => void): void {
    this.#listeners.push(listener);
  }

  /** The entry while `entry`'s lease is still its own (not dead-lettered, not retaken). */
  #held(entry: QueuedReceipt): Entry | undefined {
    const held = this.#entries.get(entry.id);
    return held !== undefined && held.deadAt === undefined && held.lease === entry.lease ? held : undefined;
  }

  /** Drops sent ids older than the keep time (the map is in sending order). */
  #forget(): void {
    const cutoff = this.#clock.now() - this.#keepMs;
    for (const [id, at] of this.#sent) {
      if (at > cutoff) break;
      this.#sent.delete(id);
    }
  }
}
