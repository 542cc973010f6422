/**
 * A stream of ticket updates for the fault tests: unique generic tickets of one
 * run, sessions subscribed to them in Redis, updates published straight to
 * TOPICS.ticketUpdates as valid TicketUpdate JSON (keyed by ticket, each with
 * its own id and a version increasing per ticket, so none is ever stale), and
 * the feed streams read back as each session reads them, per session and ticket.
 */
import { type Bus, createBus } from '@ctxflow/bus';
import { DEFAULT_TENANT, type TicketUpdate, TOPICS, ticketKey } from '@ctxflow/contracts';
import { RECORD_ID_HEADER, RedisFeedStreams, stepContextKeys } from '@ctxflow/step-context';
import { RedisSubscriptionStore, subscriptionId } from '@ctxflow/subscriptions';
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
  /** KAFKA_TOPIC_PREFIX of the services under test (default none). */
  topicPrefix?: string;
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
    this.#bus = createBus({
      client: 'platformatic',
      clientId: `fault-load-${options.run}`,
      brokers: options.brokers,
      topicPrefix: options.topicPrefix ?? '',
    });
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

  /** The next update, round-robin over the tickets (or of `ticket`). */
  #next(ticket = this.tickets[this.#published % this.tickets.length]!): TicketUpdate {
    const n = this.#published++;
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

  /** Publishes one update of each of `tickets` (recorded with the checker as `publish` does); resolves with them. */
  async publishTo(tickets: readonly string[]): Promise<TicketUpdate[]> {
    const updates = tickets.map((ticket) => this.#next(ticket));
    for (const u of updates) {
      for (const session of this.followers.get(u.ticket)!) this.#o.checker.sent(`${session}|${u.ticket}`, u.id);
    }
    await this.#bus.publisher.publish(
      TOPICS.ticketUpdates,
      updates.map((u) => ({ key: ticketKey(u), value: JSON.stringify(u), headers: { [RECORD_ID_HEADER]: u.id } })),
    );
    return updates;
  }

  /**
   * Entries the sessions read from their streams right now (one per update and
   * follower), counted without reading them: each follower follows one ticket's
   * stream from its start (subscribed before any update), so it reads every
   * entry of it: the stream's length per follower.
   */
  async landedEntries(redis: Redis | Cluster = this.#o.redis): Promise<number> {
    const keys = stepContextKeys(this.#o.prefix).source(DEFAULT_TENANT, 'generic');
    const pipeline = redis.pipeline();
    for (const [ticket, sessions] of this.followers) {
      const stream = keys.stream(subscriptionId({ source: 'generic', ticket }));
      for (let i = 0; i < sessions.length; i++) pipeline.xlen(stream);
    }
    const replies = (await pipeline.exec()) ?? [];
    let total = 0;
    for (const [err, n] of replies) {
      if (err) throw err;
      total += n as number;
    }
    return total;
  }

  /**
   * What every session reads from its feed streams (from where its subscriptions
   * started, position after position, as its steps would), as update ids per
   * `<session>|<ticket>`, in the order read.
   */
  async landed(redis: Redis | Cluster = this.#o.redis): Promise<Map<string, string[]>> {
    const store = new RedisFeedStreams({ redis, prefix: this.#o.prefix });
    const subscriptions = new RedisSubscriptionStore({ redis, prefix: this.#o.prefix });
    const out = new Map<string, string[]>();
    for (const session of this.#o.sessions) {
      const follows = await subscriptions.follows(session);
      let position: Record<string, number> = {};
      for (;;) {
        const entries = await store.readSince(follows, position, { maxEntries: 1_000, maxBytes: 1e9 });
        if (entries.length === 0) break;
        for (const { source, seq, update } of entries) {
          const stream = `${session}|${update.ticket}`;
          const ids = out.get(stream) ?? [];
          ids.push(update.id);
          out.set(stream, ids);
          const after = position[source] ?? 0;
          if (seq <= after) throw new Error(`seq ${seq} after ${after} in ${session}: not increasing`);
          position = { ...position, [source]: seq };
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
