import { type FollowOptions, followStream, type StreamEvent } from './follow.ts';
import type { ProviderFormat } from './provider-types.ts';
import { answerError, CtxflowApiError, readAnswer, type Send, sleep } from './transport.ts';
import type {
  AddContextRequest,
  Agent,
  BranchRequest,
  CallContextRequest,
  ClientAnswer,
  CreateAgentRequest,
  CreateSessionRequest,
  GateRequest,
  Message,
  MessageInput,
  NeutralStepAnswer,
  ProviderStepAnswer,
  Recorded,
  RestartRequest,
  RewindAnswer,
  RewindRequest,
  SessionSnapshot,
  SessionSummary,
  StepRequest,
  Subscription,
  SubscriptionAnswer,
  ToolDecision,
  UnsubscribeAnswer,
  UpdateAgentAnswer,
  UpdateAgentRequest,
  UpdateSessionAnswer,
  UpdateSessionRequest,
  UsageRecorded,
  UsageReport,
} from './types.ts';

export interface CtxflowClientOptions {
  /** e.g. `http://127.0.0.1:8080` */
  baseURL: string;
  /** An API key of the server (CTXFLOW_API_KEYS, CTXFLOW_API_KEYS_FILE) or a JWT of its issuer: sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** The fetch to send with (default: the global fetch). */
  fetch?: typeof fetch;
  /** Retries of a retryable refusal or a lost answer, after the first attempt (default 3). */
  maxRetries?: number;
  /** The first retry's delay in ms, doubled per retry, with jitter (default 200); a Retry-After header wins. */
  retryDelayMs?: number;
  /** The longest delay between attempts in ms (default 5,000). */
  maxRetryDelayMs?: number;
  /** A time limit per attempt in ms (default none). */
  timeoutMs?: number;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
  /** Makes idempotency keys and step request ids (default crypto.randomUUID). */
  newId?: () => string;
}

/** Options of one call. */
export interface CallOptions {
  signal?: AbortSignal;
}

const seg = encodeURIComponent;

/**
 * A typed client for the whole ctxflow HTTP API. Refusals throw `CtxflowApiError`; retryable ones
 * (the server says `retryable: true`) are sent again with backoff, and so are requests whose answer
 * was lost when sending them again is safe (reads, and writes with an idempotency key: `POST /context`
 * with its `key`, steps and restarts with their `requestId`, both made once per call when not given).
 */
export class CtxflowClient {
  readonly #base: string;
  readonly #fetch: typeof fetch;
  readonly #headers: Record<string, string>;
  readonly #maxRetries: number;
  readonly #retryDelayMs: number;
  readonly #maxRetryDelayMs: number;
  readonly #timeoutMs: number | undefined;
  readonly #newId: () => string;

  constructor(options: CtxflowClientOptions) {
    this.#base = options.baseURL.replace(/\/+$/, '');
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.#headers = {
      ...options.headers,
      ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
    };
    this.#maxRetries = options.maxRetries ?? 3;
    this.#retryDelayMs = options.retryDelayMs ?? 200;
    this.#maxRetryDelayMs = options.maxRetryDelayMs ?? 5_000;
    this.#timeoutMs = options.timeoutMs;
    this.#newId = options.newId ?? (() => globalThis.crypto.randomUUID());
  }

  /** One request, retried as the class comment says. */
  async request<T>(send: Send): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      let error: CtxflowApiError;
      let retryAfterMs: number | undefined;
      try {
        const response = await this.#attempt(send);
        const { text, parsed } = await readAnswer(response);
        if (response.ok) return parsed as T;
        error = answerError(response.status, parsed, text, `${send.method} ${send.path}`);
        const header = response.headers.get('retry-after');
        if (header !== null && /^\d+$/.test(header)) retryAfterMs = Number(header) * 1000;
      } catch (err) {
        if (send.signal?.aborted) throw err;
        error = new CtxflowApiError(
          0,
          'network_error',
          `${send.method} ${send.path}: ${err instanceof Error ? err.message : String(err)}`,
          send.idempotent,
          undefined,
          { cause: err },
        );
      }
      if (!error.retryable || attempt >= this.#maxRetries) throw error;
      const backoff = Math.min(this.#maxRetryDelayMs, this.#retryDelayMs * 2 ** attempt);
      await sleep(retryAfterMs ?? backoff / 2 + Math.random() * (backoff / 2), send.signal);
    }
  }

  #attempt(send: Send): Promise<Response> {
    const headers: Record<string, string> = { accept: 'application/json', ...this.#headers };
    if (send.body !== undefined) headers['content-type'] = 'application/json';
    const signals = [send.signal, this.#timeoutMs === undefined ? undefined : AbortSignal.timeout(this.#timeoutMs)];
    const present = signals.filter((s): s is AbortSignal => s !== undefined);
    return this.#fetch(`${this.#base}${send.path}`, {
      method: send.method,
      headers,
      ...(send.body === undefined ? {} : { body: JSON.stringify(send.body) }),
      ...(present.length ? { signal: present.length === 1 ? present[0] : AbortSignal.any(present) } : {}),
    });
  }

  #get<T>(path: string, options?: CallOptions): Promise<T> {
    return this.request<T>({ method: 'GET', path, idempotent: true, ...options });
  }
  #write<T>(method: Send['method'], path: string, body: unknown, idempotent: boolean, options?: CallOptions) {
    return this.request<T>({ method, path, body, idempotent, ...options });
  }

  readonly agents = {
    create: (body: CreateAgentRequest, options?: CallOptions) =>
      this.#write<{ agentId: string }>('POST', '/agents', body, false, options),
    get: (agentId: string, options?: CallOptions) => this.#get<Agent>(`/agents/${seg(agentId)}`, options),
    update: (agentId: string, body: UpdateAgentRequest, options?: CallOptions) =>
      this.#write<UpdateAgentAnswer>('PATCH', `/agents/${seg(agentId)}`, body, false, options),
    remember: (agentId: string, content: string, options?: CallOptions) =>
      this.#write<{ remembered: true }>('POST', `/agents/${seg(agentId)}/memories`, { content }, false, options),
    /** Erases the agent and its memories; with `cascade`, its sessions too (else 409 `state_agent_in_use`). */
    delete: (agentId: string, query: { cascade?: boolean } = {}, options?: CallOptions) =>
      this.#write<undefined>(
        'DELETE',
        `/agents/${seg(agentId)}${query.cascade ? '?cascade=true' : ''}`,
        undefined,
        true,
        options,
      ),
  };

  readonly sessions = {
    create: (body: CreateSessionRequest = {}, options?: CallOptions) =>
      this.#write<{ sessionId: string }>('POST', '/sessions', body, false, options),
    list: async (options?: CallOptions) =>
      (await this.#get<{ sessions: SessionSummary[] }>('/sessions', options)).sessions,
    get: (sessionId: string, options?: CallOptions) =>
      this.#get<SessionSnapshot>(`/sessions/${seg(sessionId)}`, options),
    /** The operator's view (rows included); its shape is the inspector's and may change. */
    inspect: (sessionId: string, options?: CallOptions) =>
      this.#get<Record<string, unknown>>(`/sessions/${seg(sessionId)}/inspect`, options),
    update: (sessionId: string, body: UpdateSessionRequest, options?: CallOptions) =>
      // Setting the same thread context or forceRefresh again changes nothing more.
      this.#write<UpdateSessionAnswer>('PATCH', `/sessions/${seg(sessionId)}`, body, true, options),
    /** Erases the session in every store (idempotent: 204 again for a session already gone). */
    delete: (sessionId: string, options?: CallOptions) =>
      this.#write<undefined>('DELETE', `/sessions/${seg(sessionId)}`, undefined, true, options),
    /**
     * The session's stream (`GET /sessions/:sessionId/stream`) as an async iterator of its events,
     * reconnecting after a dropped connection from the last event it yielded (`Last-Event-ID`);
     * see `followStream`. Stop it with `signal` or by leaving the loop.
     */
    follow: (sessionId: string, options?: FollowOptions): AsyncGenerator<StreamEvent, void, undefined> => {
      const path = `/sessions/${seg(sessionId)}/stream`;
      return followStream(
        (lastEventId, signal) =>
          this.#fetch(`${this.#base}${path}`, {
            headers: {
              ...this.#headers,
              accept: 'text/event-stream',
              ...(lastEventId === undefined ? {} : { 'last-event-id': lastEventId }),
            },
            ...(signal ? { signal } : {}),
          }),
        async (response) => {
          const { text, parsed } = await readAnswer(response);
          const error = answerError(response.status, parsed, text, `GET ${path}`);
          return { error, retryable: error.retryable };
        },
        options,
      );
    },
  };

  readonly context = {
    /**
     * `POST /context`. Without `key`, one is made for this call, so a retry records nothing twice;
     * pass `key: null` to send none (each send is then a new request, R13).
     */
    add: (body: Omit<AddContextRequest, 'key'> & { key?: string | null }, options?: CallOptions) => {
      const { key, ...rest } = body;
      const sent: AddContextRequest = key === null ? rest : { ...rest, key: key ?? this.#newId() };
      return this.#write<Recorded>('POST', '/context', sent, sent.key !== undefined, options);
    },
  };

  /**
   * `POST /sessions/:sessionId/steps`: the context pass before one model call. A `requestId` is made
   * once per call when not given and reused by every retry, so a retry answers the same step.
   */
  step<F extends ProviderFormat>(
    sessionId: string,
    body: StepRequest & { format: F },
    options?: CallOptions,
  ): Promise<ProviderStepAnswer<F>>;
  step(
    sessionId: string,
    body?: StepRequest & { format?: 'neutral' },
    options?: CallOptions,
  ): Promise<NeutralStepAnswer>;
  step(
    sessionId: string,
    body: StepRequest = {},
    options?: CallOptions,
  ): Promise<NeutralStepAnswer | ProviderStepAnswer<ProviderFormat>> {
    const sent = { ...body, requestId: body.requestId ?? this.#newId() };
    return this.#write('POST', `/sessions/${seg(sessionId)}/steps`, sent, true, options);
  }

  /** `POST /sessions/:sessionId/runs/restart`: a failed run from its start (R31); `requestId` as in `step`. */
  restart<F extends ProviderFormat>(
    sessionId: string,
    body: RestartRequest & { format: F },
    options?: CallOptions,
  ): Promise<ProviderStepAnswer<F>>;
  restart(
    sessionId: string,
    body?: RestartRequest & { format?: 'neutral' },
    options?: CallOptions,
  ): Promise<NeutralStepAnswer>;
  restart(
    sessionId: string,
    body: RestartRequest = {},
    options?: CallOptions,
  ): Promise<NeutralStepAnswer | ProviderStepAnswer<ProviderFormat>> {
    const sent = { ...body, requestId: body.requestId ?? this.#newId() };
    return this.#write('POST', `/sessions/${seg(sessionId)}/runs/restart`, sent, true, options);
  }

  readonly usage = {
    /**
     * `POST /sessions/:sessionId/steps/:stepId/usage`: what the provider answered of the step's model
     * request (`usage` as the SDK returned it). First report wins: sending it again changes nothing.
     */
    report: (sessionId: string, stepId: string, report: UsageReport, options?: CallOptions) =>
      this.#write<UsageRecorded>(
        'POST',
        `/sessions/${seg(sessionId)}/steps/${seg(stepId)}/usage`,
        report,
        true,
        options,
      ),
  };

  readonly messages = {
    /** Records one message. */
    create: (sessionId: string, message: MessageInput, options?: CallOptions) =>
      this.#write<{ seq: number }>('POST', `/sessions/${seg(sessionId)}/messages`, message, false, options),
    /** Records messages in one write (an assistant turn with its tool results): no step lands between them. */
    createBatch: (sessionId: string, messages: MessageInput[], options?: CallOptions) =>
      this.#write<{ seqs: number[] }>('POST', `/sessions/${seg(sessionId)}/messages`, { messages }, false, options),
    list: async (sessionId: string, options?: CallOptions) =>
      (await this.#get<{ messages: Message[] }>(`/sessions/${seg(sessionId)}/messages`, options)).messages,
  };

  readonly toolCalls = {
    /** The tool gate: whether to execute a call the model made. */
    gate: (sessionId: string, body: GateRequest, options?: CallOptions) =>
      this.#write<ToolDecision>('POST', `/sessions/${seg(sessionId)}/tool-calls`, body, true, options),
    /** A tool's (or hook's) addContext for its call: first wins, repeats record nothing (R15). */
    addContext: (sessionId: string, callId: string, body: CallContextRequest, options?: CallOptions) =>
      this.#write<Recorded>(
        'POST',
        `/sessions/${seg(sessionId)}/tool-calls/${seg(callId)}/context`,
        body,
        true,
        options,
      ),
  };

  readonly approvals = {
    answer: (sessionId: string, callId: string, approved: boolean, options?: CallOptions) =>
      this.#write<ToolDecision>(
        'POST',
        `/sessions/${seg(sessionId)}/tool-calls/${seg(callId)}/approval`,
        { approved },
        false,
        options,
      ),
  };

  readonly answers = {
    /** A client tool's answer; on time it is the call's result (do not record it again). */
    send: (sessionId: string, callId: string, content: string, options?: CallOptions) =>
      this.#write<ClientAnswer>(
        'POST',
        `/sessions/${seg(sessionId)}/tool-calls/${seg(callId)}/answer`,
        { content },
        true,
        options,
      ),
  };

  /** Truncates the log to a step (`toStepId`: keep it; `beforeStepId`: drop it too). */
  rewind(sessionId: string, body: RewindRequest, options?: CallOptions): Promise<RewindAnswer> {
    return this.#write('POST', `/sessions/${seg(sessionId)}/rewind`, body, false, options);
  }

  readonly branches = {
    create: (sessionId: string, body: BranchRequest = {}, options?: CallOptions) =>
      this.#write<{ sessionId: string }>('POST', `/sessions/${seg(sessionId)}/branches`, body, false, options),
  };

  readonly subscriptions = {
    create: (sessionId: string, subscription: Subscription, options?: CallOptions) =>
      this.#write<SubscriptionAnswer>('POST', `/sessions/${seg(sessionId)}/subscriptions`, subscription, true, options),
    delete: (sessionId: string, subscription: Subscription, options?: CallOptions) =>
      this.#write<UnsubscribeAnswer>(
        'DELETE',
        `/sessions/${seg(sessionId)}/subscriptions`,
        subscription,
        true,
        options,
      ),
    list: async (sessionId: string, options?: CallOptions) =>
      (
        await this.#get<{ sessionId: string; subscriptions: Subscription[] }>(
          `/sessions/${seg(sessionId)}/subscriptions`,
          options,
        )
      ).subscriptions,
  };
}
