/**
 * A stream of work for a session-runner under faults: app items through
 * `POST /context` (each with its own idempotency key, retried until accepted),
 * step requests `{ sessionId, requestId, mode }` through Kafka, keyed by
 * session, and steps over HTTP with a requestId (retried until answered).
 * Step results are collected from TOPICS.stepResults; what landed is read
 * back through `GET /sessions/:id/inspect`. With several runners, `runnerUrl`
 * is a function picking one for each HTTP attempt.
 */
import { type Bus, createBus, type Subscription } from '@ctxflow/bus';
import { TOPICS } from '@ctxflow/contracts';
import type { ExactlyOnce } from './exactly-once.ts';
import { sleep } from './processes.ts';

interface StepResult {
  requestId: string;
  sessionId: string;
  ok: boolean;
  stepId?: string;
  error?: { code: string; message: string };
}

interface InspectAnswer {
  steps: { stepId: string; ordinal: number; requestId?: string }[];
  log: { type: string; row?: { kind: string; source: string; content?: string } }[];
  queue: unknown[];
}

const ITEM = /^item (\S+)$/;

/** A URL, or a function picking one for each attempt (several instances behind one client). */
export type Target = string | (() => string);

const pick = (target: Target) => (typeof target === 'string' ? target : target());

/**
 * POST/GET with retries while the runner is down or restarting (connection
 * refused or reset, 5xx); a 4xx is an answer and ends the retries.
 */
export async function persistently(url: Target, init: RequestInit = {}, timeoutMs = 60_000): Promise<Response> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(pick(url), { ...init, signal: AbortSignal.timeout(5_000) });
      if (response.status < 500) return response;
      last = new Error(`${response.status} ${await response.text()}`);
    } catch (err) {
      last = err;
    }
    await sleep(100);
  }
  throw new Error(`${init.method ?? 'GET'} ${pick(url)} kept failing for ${timeoutMs} ms: ${String(last)}`);
}

function json(body: unknown): RequestInit {
  return { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}

export class StepLoad {
  readonly run: string;
  readonly #runnerUrl: () => string;
  readonly #checker: ExactlyOnce;
  readonly #bus: Bus;
  readonly sessions: string[] = [];
  /** Every requestId published, in order. */
  readonly requested: string[] = [];
  /** requestId -> every result record seen for it. */
  readonly results = new Map<string, StepResult[]>();
  /** requestIds of the steps sent over HTTP, in order, and the stepId each was answered with. */
  readonly httpRequested: string[] = [];
  readonly httpAnswers = new Map<string, string>();
  #subscription: Subscription | undefined;
  #counter = 0;
  #published: Promise<unknown> = Promise.resolve();

  constructor(options: { run: string; runnerUrl: Target; brokers: string[]; checker: ExactlyOnce }) {
    this.run = options.run;
    const runnerUrl = options.runnerUrl;
    this.#runnerUrl = () => pick(runnerUrl);
    this.#checker = options.checker;
    this.#bus = createBus({ client: 'platformatic', clientId: `fault-steps-${options.run}`, brokers: options.brokers });
  }

  /** Listens on TOPICS.stepResults in `groupId` (point it at the topic's end first: startGroupsAtEnd). */
  async listen(groupId: string): Promise<void> {
    this.#subscription = await this.#bus.subscriber.subscribe({
      topic: TOPICS.stepResults,
      groupId,
      handle: async (records) => {
        for (const record of records) {
          const result = JSON.parse(record.value) as StepResult;
          if (!result.requestId?.startsWith(`${this.run}-`)) continue; // another run's
          this.results.set(result.requestId, [...(this.results.get(result.requestId) ?? []), result]);
        }
      },
    });
    await this.#subscription.ready();
  }

  async createSessions(n: number): Promise<string[]> {
    for (let i = 0; i < n; i++) {
      const response = await persistently(() => `${this.#runnerUrl()}/sessions`, json({}));
      if (response.status !== 201) throw new Error(`POST /sessions: ${response.status} ${await response.text()}`);
      this.sessions.push(((await response.json()) as { sessionId: string }).sessionId);
    }
    return this.sessions;
  }

  /** One item and then one step request per session. Items are recorded as sent once accepted. */
  async round(): Promise<void> {
    const requests: { sessionId: string; requestId: string }[] = [];
    for (const sessionId of this.sessions) {
      const n = this.#counter++;
      const itemId = `${this.run}-i${n}`;
      const response = await persistently(
        () => `${this.#runnerUrl()}/context`,
        json({ sessionId, key: itemId, items: [{ kind: 'notice', content: `item ${itemId}` }] }),
      );
      if (response.status !== 200) throw new Error(`POST /context: ${response.status} ${await response.text()}`);
      this.#checker.sent(`${sessionId}|items`, itemId);
      requests.push({ sessionId, requestId: `${this.run}-r${n}` });
    }
    await this.#request(requests);
  }

  /**
   * `perSession` step requests for each session in one publish, no items: a
   * backlog the runner is still working through a moment later. Returns their ids.
   */
  async burst(perSession: number): Promise<string[]> {
    const requests: { sessionId: string; requestId: string }[] = [];
    for (let i = 0; i < perSession; i++) {
      for (const sessionId of this.sessions) requests.push({ sessionId, requestId: `${this.run}-r${this.#counter++}` });
    }
    await this.#request(requests);
    return requests.map((r) => r.requestId);
  }

  /**
   * Publishes step requests, one publish after the other: the order they are
   * recorded as sent in is the order they reach each session's partition, even
   * when a burst and a round publish at the same time.
   */
  #request(requests: { sessionId: string; requestId: string }[]): Promise<void> {
    for (const { sessionId, requestId } of requests) {
      this.#checker.sent(`${sessionId}|steps`, requestId);
      this.requested.push(requestId);
    }
    const records = requests.map(({ sessionId, requestId }) => ({
      key: sessionId,
      value: JSON.stringify({ sessionId, requestId, mode: 'first' }),
    }));
    const published = this.#published.then(() => this.#bus.publisher.publish(TOPICS.stepRequests, records));
    this.#published = published.catch(() => {});
    return published;
  }

  /**
   * One step of `sessionId` over HTTP with its own requestId (`<run>-h<n>`),
   * recorded as sent (stream `<session>|http-steps`) before the first attempt
   * and sent again, with the same requestId, until answered: a refused or
   * reset connection, a 5xx or a retryable refusal (409 state_conflict) tries
   * again; any other answer is thrown. Returns the stepId of the answer. One
   * session's HTTP steps are sent one after the other, so their order is the
   * order they were sent in.
   */
  async httpStep(sessionId: string, timeoutMs = 60_000): Promise<string> {
    const requestId = `${this.run}-h${this.#counter++}`;
    this.#checker.sent(`${sessionId}|http-steps`, requestId);
    this.httpRequested.push(requestId);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const response = await persistently(
        () => `${this.#runnerUrl()}/sessions/${sessionId}/steps`,
        json({ requestId }),
        Math.max(1, deadline - Date.now()),
      );
      const body = (await response.json()) as { stepId?: string; error?: { code: string; retryable?: boolean } };
      if (response.status === 200 && body.stepId) {
        this.httpAnswers.set(requestId, body.stepId);
        return body.stepId;
      }
      if (body.error?.retryable !== true || Date.now() > deadline) {
        throw new Error(`POST /sessions/${sessionId}/steps ${requestId}: ${response.status} ${JSON.stringify(body)}`);
      }
      await sleep(50);
    }
  }

  /** Whether `requestId` has an ok result record. */
  answered(requestId: string): boolean {
    return this.results.get(requestId)?.some((r) => r.ok) === true;
  }

  /** Waits until every request has at least one ok result record. */
  async waitForResults(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.requested.some((id) => !this.answered(id))) {
      if (Date.now() > deadline) {
        const missing = this.requested.filter((id) => !this.answered(id));
        throw new Error(`${missing.length} request(s) without a result, e.g. ${missing.slice(0, 5).join(', ')}`);
      }
      await sleep(100);
    }
  }

  /**
   * What landed, per session: `<session>|steps` the requestIds of the committed
   * steps requested over Kafka and `<session>|http-steps` those of the steps
   * sent over HTTP (httpStep), each in step order; `<session>|items` the item
   * ids of the app rows in log order; plus requestId -> committed stepId, the
   * sessions' queue lengths and the content of their hook rows, in log order.
   */
  async landed(): Promise<{
    streams: Map<string, string[]>;
    stepOf: Map<string, string>;
    queued: number;
    hookRows: Map<string, string[]>;
  }> {
    const streams = new Map<string, string[]>();
    const stepOf = new Map<string, string>();
    const hookRows = new Map<string, string[]>();
    const overHttp = `${this.run}-h`;
    let queued = 0;
    for (const sessionId of this.sessions) {
      const response = await persistently(() => `${this.#runnerUrl()}/sessions/${sessionId}/inspect`);
      if (response.status !== 200) throw new Error(`inspect ${sessionId}: ${response.status}`);
      const state = (await response.json()) as InspectAnswer;
      const steps = [...state.steps].sort((a, b) => a.ordinal - b.ordinal);
      const requestIds = steps.map((s) => s.requestId ?? `(no requestId: ${s.stepId})`);
      streams.set(
        `${sessionId}|steps`,
        requestIds.filter((id) => !id.startsWith(overHttp)),
      );
      if (this.httpRequested.length > 0) {
        streams.set(
          `${sessionId}|http-steps`,
          requestIds.filter((id) => id.startsWith(overHttp)),
        );
      }
      for (const s of steps) if (s.requestId) stepOf.set(s.requestId, s.stepId);
      const items: string[] = [];
      const hooks: string[] = [];
      for (const entry of state.log) {
        const match = entry.row?.source === 'app' ? ITEM.exec(entry.row.content ?? '') : null;
        if (match) items.push(match[1]!);
        if (entry.row?.source === 'hook') hooks.push(entry.row.content ?? '');
      }
      streams.set(`${sessionId}|items`, items);
      hookRows.set(sessionId, hooks);
      queued += state.queue.length;
    }
    return { streams, stepOf, queued, hookRows };
  }

  /**
   * Results against the committed steps: every request answered ok, all of its
   * result records naming the one step committed for it (a redelivery may
   * publish the same answer again, never another step); every step sent over
   * HTTP answered with the one step committed for its requestId.
   */
  checkResults(stepOf: Map<string, string>) {
    const problems: string[] = [];
    let repeated = 0;
    let foreign = 0;
    for (const requestId of this.requested) {
      const all = this.results.get(requestId) ?? [];
      // Every runner group on this broker answers every request on the shared topic; one that
      // does not own the session answers state_session_not_found. A missing commit of ours
      // shows in the steps check, so those answers are counted, not judged.
      const results = all.filter((r) => r.ok || r.error?.code !== 'state_session_not_found');
      foreign += all.length - results.length;
      if (results.length === 0) problems.push(`${requestId}: no result`);
      if (results.length > 1) repeated += results.length - 1;
      for (const r of results) {
        if (!r.ok) problems.push(`${requestId}: refused ${JSON.stringify(r.error)}`);
        else if (r.stepId !== stepOf.get(requestId)) {
          problems.push(`${requestId}: result names ${r.stepId}, committed ${stepOf.get(requestId)}`);
        }
      }
    }
    for (const requestId of this.httpRequested) {
      const stepId = this.httpAnswers.get(requestId);
      if (stepId === undefined) problems.push(`${requestId}: no answer over HTTP`);
      else if (stepId !== stepOf.get(requestId)) {
        problems.push(`${requestId}: HTTP answer names ${stepId}, committed ${stepOf.get(requestId)}`);
      }
    }
    return { problems, repeated, foreign };
  }

  async close(): Promise<void> {
    await this.#subscription?.close();
    await this.#bus.publisher.close();
    await this.#bus.admin.close();
  }
}
