/**
 * Webhook deliveries for the fault tests: signed generic-feed requests (the
 * `x-ctxflow-timestamp` / `x-ctxflow-signature` scheme), a sender that retries
 * one delivery until it is accepted, senders over a run's tickets, and a watch
 * on TOPICS.ticketUpdates that keeps every record of one run (its tickets
 * start with the run id).
 */
import { createHmac } from 'node:crypto';
import { type Bus, createBus, type Subscription } from '@ctxflow/bus';
import { type TicketUpdate, TOPICS } from '@ctxflow/contracts';
import type { ExactlyOnce } from './exactly-once.ts';
import { sleep } from './processes.ts';

/** The generic feed's signature headers over `body` at `timestampS` (unix seconds). */
export function genericSignature(secret: string, body: string | Buffer, timestampS: number): Record<string, string> {
  const mac = createHmac('sha256', secret).update(`${timestampS}.`).update(body).digest('hex');
  return { 'x-ctxflow-timestamp': String(timestampS), 'x-ctxflow-signature': `sha256=${mac}` };
}

export const nowS = () => Math.floor(Date.now() / 1000);

/** A generic-feed body of one run: `eventId` is the delivery id, the update id is `generic:<eventId>`. */
export function genericBody(eventId: string, ticket: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ eventId, ticket, summary: `update ${eventId}`, ...extra });
}

export interface FeedAnswer {
  status: number;
  body: { accepted?: boolean; id?: string; duplicate?: boolean; error?: { code: string; retryable: boolean } };
  retryAfter: string | null;
}

/** One POST to `/feeds/generic` with the given headers and raw body. */
export async function postFeed(
  feedUrl: string,
  body: string | Buffer,
  headers: Record<string, string>,
  timeoutMs = 10_000,
): Promise<FeedAnswer> {
  const response = await fetch(feedUrl, { method: 'POST', headers, body, signal: AbortSignal.timeout(timeoutMs) });
  const text = await response.text();
  let parsed: FeedAnswer['body'] = {};
  try {
    parsed = JSON.parse(text) as FeedAnswer['body'];
  } catch {}
  return { status: response.status, body: parsed, retryAfter: response.headers.get('retry-after') };
}

/** A correctly signed delivery of `body`. */
export function postSigned(feedUrl: string, secret: string, body: string, timeoutMs?: number): Promise<FeedAnswer> {
  return postFeed(
    feedUrl,
    body,
    { 'content-type': 'application/json', ...genericSignature(secret, body, nowS()) },
    timeoutMs,
  );
}

/** A feed URL, or a function picking one for each attempt (several feed-ingestors behind one sender). */
export type FeedTarget = string | (() => string);

/**
 * Sends one delivery until it is answered 202, as a webhook sender does: a
 * 503 waits its Retry-After (capped at `maxWaitMs`), a refused or reset
 * connection or a timeout retries after a short pause; any other answer is
 * thrown. Each attempt is signed afresh and goes to the URL `feedUrl` gives
 * for it. Returns the answers seen.
 */
export async function deliverUntilAccepted(
  feedUrl: FeedTarget,
  secret: string,
  body: string,
  options: { timeoutMs: number; maxWaitMs?: number },
): Promise<{ attempts: number; unavailable: number; final: FeedAnswer }> {
  const deadline = Date.now() + options.timeoutMs;
  let attempts = 0;
  let unavailable = 0;
  let last: unknown;
  while (Date.now() < deadline) {
    attempts += 1;
    try {
      const url = typeof feedUrl === 'string' ? feedUrl : feedUrl();
      const answer = await postSigned(url, secret, body, 15_000);
      if (answer.status === 202) return { attempts, unavailable, final: answer };
      if (answer.status !== 503) throw new Error(`delivery refused: ${answer.status} ${JSON.stringify(answer.body)}`);
      unavailable += 1;
      last = answer;
      if (answer.retryAfter === null) throw new Error('503 without Retry-After');
      await sleep(Math.min(Number(answer.retryAfter) * 1000, options.maxWaitMs ?? 1_000));
    } catch (err) {
      if (err instanceof Error && /delivery refused|without Retry-After/.test(err.message)) throw err;
      last = err;
      await sleep(200);
    }
  }
  throw new Error(`delivery not accepted within ${options.timeoutMs} ms: ${JSON.stringify(last)}`);
}

export interface WebhookSendersOptions {
  /** Unique per test: event ids carry it. */
  run: string;
  /** One feed-ingestor's URL, or a function picking one for each attempt. */
  feedUrl: FeedTarget;
  secret: string;
  tickets: readonly string[];
  /** ticket -> the sessions following it. */
  followers: ReadonlyMap<string, readonly string[]>;
  checker: ExactlyOnce;
  senders: number;
  /** Pause after each accepted delivery. */
  pauseMs: number;
  /** How long one delivery may take to be accepted, retries included. */
  timeoutMs: number;
}

/**
 * Webhook senders over a run's tickets: sender `s` of `senders` owns every
 * `senders`-th ticket and sends its updates one at a time with
 * deliverUntilAccepted (version increasing per ticket), so the order per
 * ticket is its sending order. Each delivery is recorded with the checker for
 * every follower of its ticket (stream `<session>|<ticket>`, id
 * `generic:<eventId>`) before its first attempt.
 */
export class WebhookSenders {
  readonly #o: WebhookSendersOptions;
  /** Update ids (`generic:<eventId>`) answered 202, in the order of their answers. */
  readonly delivered: string[] = [];
  /** Deliveries answered 202, attempts made, and attempts answered 503. */
  accepted = 0;
  attempts = 0;
  unavailable = 0;

  constructor(options: WebhookSendersOptions) {
    this.#o = options;
  }

  /** Every sender sends while `more(i)` holds for its `i`-th delivery; resolves once all stopped. */
  async send(more: (i: number) => boolean): Promise<void> {
    const { run, feedUrl, secret, tickets, followers, checker, senders, pauseMs, timeoutMs } = this.#o;
    const sender = async (s: number) => {
      const own = tickets.filter((_, j) => j % senders === s);
      const versions = new Map<string, number>();
      for (let i = 0; more(i); i++) {
        const ticket = own[i % own.length]!;
        const version = (versions.get(ticket) ?? 0) + 1;
        versions.set(ticket, version);
        const eventId = `${run}-w${s}-u${i}`;
        for (const session of followers.get(ticket)!) checker.sent(`${session}|${ticket}`, `generic:${eventId}`);
        const result = await deliverUntilAccepted(feedUrl, secret, genericBody(eventId, ticket, { version }), {
          timeoutMs,
        });
        this.delivered.push(`generic:${eventId}`);
        this.accepted += 1;
        this.attempts += result.attempts;
        this.unavailable += result.unavailable;
        await sleep(pauseMs);
      }
    };
    await Promise.all(Array.from({ length: senders }, (_, s) => sender(s)));
  }
}

/**
 * Reads TOPICS.ticketUpdates in its own group (point it at the topic's end
 * first: startGroupsAtEnd) and keeps every record whose ticket starts with
 * `run`, as update ids per `feed|<ticket>`, in offset order per partition
 * (one ticket is one key, so one partition).
 */
export class TicketUpdatesWatch {
  readonly #run: string;
  readonly #bus: Bus;
  #subscription: Subscription | undefined;
  readonly streams = new Map<string, string[]>();
  /** Records of the run that were not a TicketUpdate of it (JSON that does not parse, no id). */
  readonly odd: string[] = [];

  constructor(options: { run: string; brokers: string[] }) {
    this.#run = options.run;
    this.#bus = createBus({ client: 'platformatic', clientId: `fault-watch-${options.run}`, brokers: options.brokers });
  }

  async listen(groupId: string): Promise<void> {
    this.#subscription = await this.#bus.subscriber.subscribe({
      topic: TOPICS.ticketUpdates,
      groupId,
      handle: async (records) => {
        for (const record of records) {
          if (!record.value.includes(this.#run)) continue; // another run's
          let update: Partial<TicketUpdate> | undefined;
          try {
            update = JSON.parse(record.value) as Partial<TicketUpdate>;
          } catch {}
          if (!update?.id || !update.ticket?.startsWith(this.#run)) {
            this.odd.push(record.value.slice(0, 200));
            continue;
          }
          const stream = `feed|${update.ticket}`;
          this.streams.set(stream, [...(this.streams.get(stream) ?? []), update.id]);
        }
      },
    });
    await this.#subscription.ready();
  }

  count(): number {
    let n = 0;
    for (const ids of this.streams.values()) n += ids.length;
    return n;
  }

  async close(): Promise<void> {
    await this.#subscription?.close();
    await this.#bus.publisher.close();
    await this.#bus.admin.close();
  }
}
