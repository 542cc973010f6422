/**
 * A stream of ticket updates for the fault tests: unique generic tickets of one
 * run, sessions subscribed to them in Redis, updates published straight to
 * TOPICS.ticketUpdates as valid TicketUpdate JSON (keyed by ticket, each with
 * its own id and a version increasing per ticket, so none is ever stale), and
 * the batch streams read back per session and ticket.
 */
import { type Bus, createBus } from '@ctxflow/bus';
import { DEFAULT_TENANT, type TicketUpdate, TOPICS, ticketKey } from '@ctxflow/contracts';
import { RECORD_ID_HEADER, RedisBatchStore, RedisSubscriptionStore, stepContextKeys } from '@ctxflow/step-context';
import type { Cluster, Redis } from 'ioredis';
import type { ExactlyOnce } from './exactly-once.ts';
import { sleep } from './processes.ts';

export interface TicketLoadOptions {
  /** Unique per test: tickets and event ids carry it. */
  run: string;
  sessions: string[];
  tickets: number;
  /** Each ticket goes to this many sessions (consecutive, wrapping). */
  fanout: number;
  /** A single Redis or a Redis Cluster (every key read here is one session's: one slot). */
  redis: Redis | Cluster;
  prefix: string;
  brokers: string[];
  checker: ExactlyOnce;
}

export class TicketLoad {
  readonly #o: TicketLoadOptions;
  readonly #bus: Bus;
  readonly tickets: string[];
  /** ticket -> the sessions following it. */
  readonly followers = new Map<string, string[]>();
  #published = 0;
  readonly #versions = new Map<string, number>();

  constructor(options: TicketLoadOptions) {
    this.#o = options;
    this.#bus = createBus({ client: 'platformatic', clientId: `fault-load-${options.run}`, brokers: options.brokers });
    this.tickets = Array.from({ length: options.tickets }, (_, j) => `${options.run}-t${j}`);
    this.tickets.forEach((ticket, j) => {
      const sessions = options.sessions;
      this.followers.set(
        ticket,
        Array.from({ length: options.fanout }, (_, k) => sessions[(j + k) % sessions.length]!),
      );
    });
  }

  get published(): number {
    return this.#published;
  }

  /** Subscribes every follower to its tickets (the step-context subscription store, same prefix). */
  async subscribe(): Promise<void> {
    const store = new RedisSubscriptionStore({ redis: this.#o.redis, prefix: this.#o.prefix });
    for (const [ticket, sessions] of this.followers) {
      for (const session of sessions) await store.subscribe(DEFAULT_TENANT, session, { source: 'generic', ticket });
    }
  }

  /** The next update, round-robin over the tickets. */
  #next(): TicketUpdate {
    const n = this.#published++;
    const ticket = this.tickets[n % this.tickets.length]!;
    const version = (this.#versions.get(ticket) ?? 0) + 1;
    this.#versions.set(ticket, version);
    const eventId = `${this.#o.run}-u${n}`;
    const now = new Date().toISOString();
    return {
      id: `generic:${eventId}`,
      source: 'generic',
      ticket,
      eventId,
      kind: 'updated',
      summary: `update ${n} of ${ticket}`,
      version,
      occurredAt: now,
      receivedAt: now,
    };
  }

  /**
   * Publishes `count` updates in chunks of `perChunk`, one chunk every `everyMs`;
   * each id is recorded with the checker (stream `<session>|<ticket>`) before it is sent.
   */
  async publish(count: number, pace: { perChunk: number; everyMs: number }): Promise<void> {
    for (let sent = 0; sent < count; sent += pace.perChunk) {
      const updates = Array.from({ length: Math.min(pace.perChunk, count - sent) }, () => this.#next());
      for (const u of updates) {
        for (const session of this.followers.get(u.ticket)!) this.#o.checker.sent(`${session}|${u.ticket}`, u.id);
      }
      await this.#bus.publisher.publish(
        TOPICS.ticketUpdates,
        updates.map((u) => ({ key: ticketKey(u), value: JSON.stringify(u), headers: { [RECORD_ID_HEADER]: u.id } })),
      );
      if (pace.everyMs > 0) await sleep(pace.everyMs);
    }
  }

  /** Entries in the sessions' batch streams right now (one per update and follower). */
  async landedEntries(redis: Redis | Cluster = this.#o.redis): Promise<number> {
    const keys = stepContextKeys(this.#o.prefix);
    // One command per session, sent at once: on a Cluster the sessions' streams are in different slots.
    const lengths = await Promise.all(this.#o.sessions.map((session) => redis.xlen(keys.session(session).stream)));
    return lengths.reduce((sum, n) => sum + n, 0);
  }

  /** Every session's batch stream, as update ids per `<session>|<ticket>`, in cursor order. */
  async landed(redis: Redis | Cluster = this.#o.redis): Promise<Map<string, string[]>> {
    const store = new RedisBatchStore({ redis, prefix: this.#o.prefix });
    const out = new Map<string, string[]>();
    for (const session of this.#o.sessions) {
      let after = 0;
      for (;;) {
        const entries = await store.readSince(session, after, { maxEntries: 1_000, maxBytes: 1e9 });
        if (entries.length === 0) break;
        for (const { cursor, update } of entries) {
          const stream = `${session}|${update.ticket}`;
          const ids = out.get(stream) ?? [];
          ids.push(update.id);
          out.set(stream, ids);
          if (cursor <= after) throw new Error(`cursor ${cursor} after ${after} in ${session}: not increasing`);
          after = cursor;
        }
      }
    }
    return out;
  }

  async close(): Promise<void> {
    await this.#bus.publisher.close();
    await this.#bus.admin.close();
  }
}
