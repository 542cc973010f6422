/**
 * The soak's load (bench/soak.ts): its shapes (PRESETS) and the clients that send it, each one
 * operation at a time, back to back, counting what they sent per sampling period.
 */
import { createHmac, randomUUID } from 'node:crypto';

/**
 * The load shapes. `turns`: each client in a fixed mix of a step turn, a webhook, a step
 * turn, an app item, sampled once a minute. `thirds` (a runtime holding its messages,
 * in equal shares with feeds and the app): each client in turn a webhook, an app item and a
 * step with `since` and a fresh `requestId` (nothing else: what the step returns is the
 * session's rows and messages), a user message after every 30 operations, sampled every
 * 15 s. `thirds-full`: the same with full steps (no `since`).
 */
export const PRESETS = {
  turns: { mix: ['turn', 'webhook', 'turn', 'context'], periodMs: 60_000, since: true, userEvery: 0 },
  thirds: { mix: ['webhook', 'context', 'step'], periodMs: 15_000, since: true, userEvery: 30 },
  'thirds-full': { mix: ['webhook', 'context', 'step'], periodMs: 15_000, since: false, userEvery: 30 },
} as const satisfies Record<string, { mix: readonly Kind[]; periodMs: number; since: boolean; userEvery: number }>;
export type SoakPreset = keyof typeof PRESETS;

export type Kind = 'turn' | 'webhook' | 'context' | 'step' | 'user';

const REQUEST_TIMEOUT_MS = 30_000;

/** The generic feed's signature headers (`x-ctxflow-timestamp`, `x-ctxflow-signature`) over `body`. */
function signed(secret: string, body: string): Record<string, string> {
  const ts = Math.floor(Date.now() / 1000);
  const mac = createHmac('sha256', secret).update(`${ts}.`).update(body).digest('hex');
  return {
    'content-type': 'application/json',
    'x-ctxflow-timestamp': String(ts),
    'x-ctxflow-signature': `sha256=${mac}`,
  };
}

export interface Counters {
  ops: Record<Kind, number>;
  /** Bytes of the step answers' bodies (what the runtime gets back). */
  stepBytes: number;
  requests: number;
  errors: number;
  /** Feed and app rows the steps delivered. */
  rows: number;
  /** Steps whose answer replaced what the runtime held (request.since 0 although since > 0). */
  replaced: number;
  stepMs: number[];
}

export const newCounters = (): Counters => ({
  ops: { turn: 0, webhook: 0, context: 0, step: 0, user: 0 },
  stepBytes: 0,
  requests: 0,
  errors: 0,
  rows: 0,
  replaced: 0,
  stepMs: [],
});

/** A POST counted in `counters`: its text, or undefined (counted and noted) when it failed. */
export type Post = (
  url: string,
  body: string,
  headers: Record<string, string>,
  counters: Counters,
) => Promise<string | undefined>;

/** POSTs that count their request and its failure, and note what failed. */
export function poster(noteError: (what: string) => void): Post {
  return async (url: string, body: string, headers: Record<string, string>, counters: Counters) => {
    counters.requests += 1;
    try {
      const response = await fetch(url, {
        method: 'POST',
        headers,
        body,
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
      const text = await response.text();
      if (response.status >= 300) {
        counters.errors += 1;
        noteError(`${new URL(url).pathname}: ${response.status} ${text.slice(0, 300)}`);
        return undefined;
      }
      return text;
    } catch (err) {
      counters.errors += 1;
      noteError(`${new URL(url).pathname}: ${String(err)}`);
      return undefined;
    }
  };
}

/** What the clients send to. */
export interface LoadTargets {
  runnerUrl: string;
  feedUrl: string;
  /** The generic feed's secret. */
  secret: string;
  sessions: string[];
  tickets: string[];
  /** The run's id, in every event id and app key. */
  run: string;
  preset: (typeof PRESETS)[SoakPreset];
  clients: number;
  post: Post;
  noteError: (what: string) => void;
}

/** The running load: `take()` the counters of the period that ends (a new period starts), `stop()` it. */
export interface Load {
  take(): Counters;
  stop(): Promise<void>;
}

/** Starts `targets.clients` clients, each owning its share of the sessions and tickets. */
export function startLoad(targets: LoadTargets): Load {
  const { secret, sessions, tickets, run, preset, post, noteError } = targets;
  const runner = { url: targets.runnerUrl };
  const feed = { url: targets.feedUrl };
  const json = { 'content-type': 'application/json' };
  // The counters of the current period; swapped at each sample.
  let counters = newCounters();
  let stopping = false;
  const held = new Map<string, number>(sessions.map((s) => [s, 0]));
  const versions = new Map<string, number>();
  const turn = async (sessionId: string, n: number) => {
    const c = counters;
    const base = `${runner.url}/sessions/${sessionId}`;
    const user = { role: 'user', content: `Question ${n}: is the checkout for carts over 50 items fixed yet?` };
    if ((await post(`${base}/messages`, JSON.stringify(user), json, c)) === undefined) return;
    const since = held.get(sessionId)!;
    const start = performance.now();
    const text = await post(`${base}/steps`, JSON.stringify({ since }), json, c);
    if (text === undefined) return;
    c.stepMs.push(performance.now() - start);
    c.stepBytes += Buffer.byteLength(text);
    const answer = JSON.parse(text) as {
      rows: unknown[];
      request: { messages: unknown[]; since?: number };
      skipped: { reason: string; message: string }[];
    };
    // The feed hook left out of this step (timeout, error): its updates wait for a later step.
    for (const skip of answer.skipped) {
      c.errors += 1;
      noteError(`step ${sessionId}: context skipped: ${skip.reason} ${skip.message}`);
    }
    const appended = answer.request.since ?? 0;
    if (since > 0 && appended === 0) c.replaced += 1;
    held.set(sessionId, appended + answer.request.messages.length);
    c.rows += answer.rows.length;
    const assistant = {
      role: 'assistant',
      content: `Answer ${n}: it is scheduled for the next deploy, see the ticket.`,
    };
    if ((await post(`${base}/messages`, JSON.stringify(assistant), json, c)) === undefined) return;
    c.ops.turn += 1;
  };
  // A step alone (`thirds`): with `since` the messages held from the previous answer, or full.
  const step = async (sessionId: string) => {
    const c = counters;
    const since = preset.since ? held.get(sessionId)! : undefined;
    const start = performance.now();
    const body = JSON.stringify({ requestId: randomUUID(), ...(since === undefined ? {} : { since }) });
    const text = await post(`${runner.url}/sessions/${sessionId}/steps`, body, json, c);
    if (text === undefined) return;
    c.stepMs.push(performance.now() - start);
    c.stepBytes += Buffer.byteLength(text);
    const answer = JSON.parse(text) as {
      rows: unknown[];
      request: { messages: unknown[]; since?: number };
      skipped: { reason: string; message: string }[];
    };
    for (const skip of answer.skipped) {
      c.errors += 1;
      noteError(`step ${sessionId}: context skipped: ${skip.reason} ${skip.message}`);
    }
    const appended = answer.request.since ?? 0;
    if (since !== undefined && since > 0 && appended === 0) c.replaced += 1;
    held.set(sessionId, appended + answer.request.messages.length);
    c.rows += answer.rows.length;
    c.ops.step += 1;
  };
  const userMessage = async (sessionId: string, n: number) => {
    const c = counters;
    const user = { role: 'user', content: `Question ${n}: is the checkout for carts over 50 items fixed yet?` };
    const text = await post(`${runner.url}/sessions/${sessionId}/messages`, JSON.stringify(user), json, c);
    if (text !== undefined) c.ops.user += 1;
  };
  const webhook = async (ticket: string, eventId: string) => {
    const c = counters;
    const version = (versions.get(ticket) ?? 0) + 1;
    versions.set(ticket, version);
    const body = JSON.stringify({
      eventId,
      ticket,
      version,
      summary: `Customer replied (${eventId}): the checkout still fails for carts over 50 items; HAR attached.`,
    });
    if ((await post(`${feed.url}/feeds/generic`, body, signed(secret, body), c)) !== undefined) c.ops.webhook += 1;
  };
  const context = async (sessionId: string, key: string) => {
    const c = counters;
    const body = JSON.stringify({
      sessionId,
      key,
      items: [{ kind: 'notice', content: `Deploy ${key} finished: checkout-service 2.14.1 is live in eu-west.` }],
    });
    if ((await post(`${runner.url}/context`, body, json, c)) !== undefined) c.ops.context += 1;
  };
  const client = async (index: number) => {
    const own = sessions.filter((_, i) => i % targets.clients === index);
    const ownTickets = tickets.filter((_, i) => i % targets.clients === index);
    const mix: readonly Kind[] = preset.mix;
    let turns = 0;
    for (let i = 0; !stopping; i++) {
      const kind = mix[i % mix.length]!;
      const id = `${run}-c${index}-${i}`;
      if (kind === 'turn') await turn(own[turns++ % own.length]!, i);
      else if (kind === 'step') await step(own[turns++ % own.length]!);
      else if (kind === 'webhook') await webhook(ownTickets[i % ownTickets.length]!, id);
      else await context(own[i % own.length]!, id);
      if (preset.userEvery > 0 && (i + 1) % preset.userEvery === 0) await userMessage(own[i % own.length]!, i);
    }
  };
  const clients = Array.from({ length: targets.clients }, (_, i) => client(i));
  return {
    take() {
      const c = counters;
      counters = newCounters();
      return c;
    },
    async stop() {
      stopping = true;
      await Promise.all(clients);
    },
  };
}
