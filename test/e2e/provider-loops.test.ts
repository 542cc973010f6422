/**
 * Contract v2 provider formats end to end: an agent loop per format, with the official SDK
 * client (openai chat.completions, openai responses, @anthropic-ai/sdk messages) pointed at
 * the provider stand-in (test/support/provider-stand-in.ts, which refuses what the API
 * documents as invalid), and ctxflow embedded (app.inject). The step answer's `request` is
 * spread into the SDK call with no other code; the loop goes through a tool call and its
 * result, a switch-off by that tool mid-run, a gate refusal, the model's answer, a signed
 * ticket update (POST /feeds/generic), a forced completion and a rewind. The type check of this file is the proof that the bodies fit the
 * SDKs' parameter types: no cast anywhere.
 *
 * Longer than 400 lines: one agent loop per provider format, each through the same scripted turns so that they can be compared.
 */
import { createHmac } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import { type CacheHints, type ModelRequest, type StepMode, TOPICS } from '@ctxflow/contracts';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import {
  cachedPrefix,
  PROVIDER_FORMATS,
  type ProviderFormat,
  type ProviderRequests,
  prefixShare,
  toProviderRequest,
} from '@ctxflow/session-runner';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createHarness, type Harness } from '../support/harness.ts';
import { type ProviderStandIn, type ScriptedTurn, startProviderStandIn } from '../support/provider-stand-in.ts';

const MODEL = 'test-model';
const MAX_TOKENS = 1024;

let standIn: ProviderStandIn;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  standIn = await startProviderStandIn();
  openai = new OpenAI({ apiKey: 'test', baseURL: `${standIn.origin}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'test', baseURL: standIn.origin, maxRetries: 0 });
});
afterAll(() => standIn.close());

/** What the runtime records of a model turn: POST /sessions/:id/messages' assistant message. */
interface ModelTurn {
  content: string;
  toolCalls: { callId: string; name: string; arguments: string }[];
}

/** One model call per format: the step's request spread into the official client, the answer read back. */
const callModel: { [F in ProviderFormat]: (request: ProviderRequests[F]) => Promise<ModelTurn> } = {
  'openai-chat': async (request) => {
    const completion = await openai.chat.completions.create({ model: MODEL, ...request });
    const message = completion.choices[0]!.message;
    return {
      content: message.content ?? '',
      toolCalls: (message.tool_calls ?? []).flatMap((c) =>
        c.type === 'function' ? [{ callId: c.id, name: c.function.name, arguments: c.function.arguments }] : [],
      ),
    };
  },
  'openai-responses': async (request) => {
    const response = await openai.responses.create({ model: MODEL, ...request });
    return {
      content: response.output_text,
      toolCalls: response.output.flatMap((item) =>
        item.type === 'function_call' ? [{ callId: item.call_id, name: item.name, arguments: item.arguments }] : [],
      ),
    };
  },
  anthropic: async (request) => {
    const message = await anthropic.messages.create({ model: MODEL, max_tokens: MAX_TOKENS, ...request });
    return {
      content: message.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join(''),
      toolCalls: message.content.flatMap((b) =>
        b.type === 'tool_use' ? [{ callId: b.id, name: b.name, arguments: JSON.stringify(b.input) }] : [],
      ),
    };
  },
};

/** What the SDK must have sent for a request: the body plus `model` (and `max_tokens`). */
function sent<F extends ProviderFormat>(format: F, request: ProviderRequests[F]): unknown {
  return format === 'anthropic' ? { model: MODEL, max_tokens: MAX_TOKENS, ...request } : { model: MODEL, ...request };
}

interface NeutralAnswer {
  format: string;
  stepId: string;
  rows: { id: string }[];
  request: ModelRequest;
  cursor: unknown;
  cache: CacheHints;
}

interface StepAnswer<F extends ProviderFormat> {
  stepId: string;
  rows: { id: string; kind: string; source: string }[];
  request: ProviderRequests[F];
  cursor: unknown;
  cache: CacheHints;
}

/** Where the loop sends its requests: the runner's app (no keys) or the embedded app with its key. */
type Api = Pick<Harness, 'app'> & { headers?: Record<string, string> };

async function json(h: Api, method: 'GET' | 'POST', url: string, payload?: object) {
  const res = await h.app.inject({
    method,
    url,
    ...(h.headers === undefined ? {} : { headers: h.headers }),
    ...(payload === undefined ? {} : { payload }),
  });
  expect(res.statusCode, res.body).toBeLessThan(300);
  return res.json();
}

/** POST /sessions/:id/steps in a provider format. */
function step<F extends ProviderFormat>(h: Api, sessionId: string, format: F, mode?: StepMode): Promise<StepAnswer<F>> {
  return json(h, 'POST', `/sessions/${sessionId}/steps`, { format, ...(mode ? { mode } : {}) });
}

const LOOKUP_PARAMETERS = {
  type: 'object',
  properties: { id: { type: 'integer' } },
  required: ['id'],
  additionalProperties: false,
};

const AGENT = {
  context: 'You are the order desk.',
  model: MODEL,
  tools: [
    { name: 'lookup', description: 'Find an order.', parameters: LOOKUP_PARAMETERS, strict: true },
    { name: 'notify', description: 'Tell the customer.', parameters: { type: 'object', properties: {} } },
  ],
};

const turns: ScriptedTurn[] = [
  { toolCalls: [{ name: 'lookup', arguments: { id: 7 } }] },
  { toolCalls: [{ name: 'notify', arguments: {} }] },
  { text: 'Order 7 shipped.' },
  { toolCalls: [{ name: '__finish__', arguments: { result: 'Ticket closed.' } }] },
  { text: 'Order 7 shipped on Monday.' },
];

describe('Contract v2 provider formats: POST /sessions/:id/steps { format }', () => {
  it('R3: a step asked in a provider format is the neutral step with its request converted; rows, cursor and cache are the same', async () => {
    const h = await createHarness();
    const { agentId } = await json(h, 'POST', '/agents', AGENT);
    const { sessionId } = await json(h, 'POST', '/sessions', { agentId });
    await json(h, 'POST', '/context', { sessionId, items: [{ kind: 'instruction', content: 'Be brief.' }] });
    const url = `/sessions/${sessionId}/steps`;
    const neutral: NeutralAnswer = await json(h, 'POST', url, { format: 'neutral', requestId: 'r1' });
    for (const format of PROVIDER_FORMATS) {
      // The same requestId answers the same committed step again, here in each provider format.
      const { request, format: answered, ...rest } = await json(h, 'POST', url, { format, requestId: 'r1' });
      const { request: neutralRequest, format: neutralFormat, ...neutralRest } = neutral;
      expect([answered, neutralFormat]).toEqual([format, 'neutral']);
      expect(rest).toEqual(neutralRest);
      expect(request).toEqual(toProviderRequest(format, neutralRequest, neutral.cache));
    }
    expect(neutral.rows).toHaveLength(1);
  });

  it('Contract v2: an unknown format is 400 validation_error and commits nothing', async () => {
    const h = await createHarness();
    const { sessionId } = await json(h, 'POST', '/sessions', {});
    const res = await h.app.inject({
      method: 'POST',
      url: `/sessions/${sessionId}/steps`,
      payload: { format: 'gemini' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'validation_error', retryable: false } });
    expect(res.json().error.message).toContain('format');
    expect((await json(h, 'GET', `/sessions/${sessionId}`)).steps).toBe(0);
  });
});

describe('Contract v2 provider formats: agent loops with the official SDKs against a provider stand-in', () => {
  it.each(PROVIDER_FORMATS)(
    '%s: tool call and result, switch-off mid-run, gate refusal, signed ticket update, forced completion, rewind',
    async (format) => {
      await loop(format);
    },
  );
});

describe('Contract v2 provider formats: a client call past its deadline, then its late answer (R35)', () => {
  it.each(PROVIDER_FORMATS)(
    '%s: the deadline result and the late-answer row are sent as the API takes them',
    async (format) => {
      await lateAnswer(format);
    },
  );
});

async function lateAnswer<F extends ProviderFormat>(format: F): Promise<void> {
  const h = await createHarness();
  const call = callModel[format];
  const { agentId } = await json(h, 'POST', '/agents', {
    ...AGENT,
    tools: [{ name: 'ask_user', client: true, deadlineMs: 1000, parameters: { type: 'object', properties: {} } }],
  });
  const { sessionId } = await json(h, 'POST', '/sessions', { agentId });
  const base = `/sessions/${sessionId}`;
  const from = standIn.requests.length;
  standIn.script(
    { text: 'Let me ask.', toolCalls: [{ name: 'ask_user', arguments: {} }] },
    { text: 'No answer yet; I will wait.' },
    { text: 'Friday it is.' },
  );
  await json(h, 'POST', `${base}/messages`, { role: 'user', content: 'Book a slot.' });
  const ask = await call((await step(h, sessionId, format)).request);
  const callId = ask.toolCalls[0]!.callId;
  await json(h, 'POST', `${base}/messages`, {
    messages: [{ role: 'assistant', content: ask.content, toolCalls: ask.toolCalls }],
  });
  expect(await json(h, 'POST', `${base}/tool-calls`, { callId, name: 'ask_user' })).toMatchObject({
    execute: true,
    client: true,
  });
  h.clock.advance(1001);
  // ctxflow answers the call (deadline_missed); the model is called with that result.
  const missed = await step(h, sessionId, format);
  const wait = await call(missed.request);
  await json(h, 'POST', `${base}/messages`, { role: 'assistant', content: wait.content });
  expect(await json(h, 'POST', `${base}/tool-calls/${callId}/answer`, { content: 'Friday' })).toEqual({
    late: true,
    recorded: 1,
  });
  // The late answer is a late-answer notice row (user form) at the next call.
  const late = await step(h, sessionId, format);
  expect(late.rows.map((r) => [r.kind, r.source])).toEqual([['notice', 'late-answer']]);
  expect(await call(late.request)).toEqual({ content: 'Friday it is.', toolCalls: [] });
  expect(standIn.requests.slice(from).map((r) => [r.status, r.error])).toEqual([
    [200, undefined],
    [200, undefined],
    [200, undefined],
  ]);
  const sentText = JSON.stringify(standIn.requests.at(-1)!.body);
  expect(sentText).toContain('No answer (deadline_missed): the client did not answer ask_user by its deadline');
  expect(sentText).toContain('Late answer from tool ask_user');
  expect(prefixShare(cachedPrefix[format](missed.request), cachedPrefix[format](late.request))).toBe(1);
}

const FEED_SECRET = 'loops-feed-secret';
const TICKET_NEWS = 'Customer replied: the parcel arrived damaged';

/** A generic feed delivery, signed as the webhook sender signs it (HMAC-SHA256 of `ts.body`). */
function signed(update: object) {
  const raw = JSON.stringify(update);
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = createHmac('sha256', FEED_SECRET).update(`${ts}.${raw}`).digest('hex');
  return {
    payload: raw,
    headers: { 'content-type': 'application/json', 'x-ctxflow-timestamp': ts, 'x-ctxflow-signature': `sha256=${sig}` },
  };
}

async function loop<F extends ProviderFormat>(format: F): Promise<void> {
  // The embedded app: the runner with the feeds and step-context; with API keys each feed
  // secret names its tenant.
  const embedded = await buildEmbeddedApp({
    config: {
      apiKeys: new Map([['loops-key', 'tenant-loops']]),
      secrets: { generic: [{ tenant: 'tenant-loops', secret: FEED_SECRET }] },
    },
  });
  onTestFinished(() => embedded.close());
  const h: Api = { app: embedded.app, headers: { authorization: 'Bearer loops-key' } };
  const call = callModel[format];
  const { agentId } = await json(h, 'POST', '/agents', AGENT);
  const { sessionId } = await json(h, 'POST', '/sessions', { agentId });
  const base = `/sessions/${sessionId}`;
  await json(h, 'POST', `${base}/subscriptions`, { source: 'generic', ticket: 'T-7' });
  const from = standIn.requests.length;
  standIn.script(...turns);
  const answers: StepAnswer<F>[] = [];
  const model = async (answer: StepAnswer<F>) => {
    answers.push(answer);
    const turn = await call(answer.request);
    // The SDK sent the step's request as it is, plus the model (and max_tokens).
    expect(standIn.requests.at(-1)!.body).toEqual(sent(format, answer.request));
    return turn;
  };

  await json(h, 'POST', `${base}/messages`, { role: 'user', content: 'Where is order 7?' });

  // 1. The model calls lookup; the gate lets it run; the tool switches notify off for the next calls
  //    (R19) and answers. The assistant turn and its result are recorded in one request.
  const first = await model(await step(h, sessionId, format));
  expect(first.toolCalls.map((c) => [c.name, c.arguments])).toEqual([['lookup', '{"id":7}']]);
  const lookup = first.toolCalls[0]!;
  expect(await json(h, 'POST', `${base}/tool-calls`, { callId: lookup.callId, name: 'lookup' })).toEqual({
    execute: true,
  });
  await json(h, 'POST', `${base}/tool-calls/${lookup.callId}/context`, {
    items: [{ kind: 'tools', disable: ['notify'] }],
  });
  await json(h, 'POST', `${base}/messages`, {
    messages: [
      { role: 'assistant', content: first.content, toolCalls: first.toolCalls },
      { role: 'tool', callId: lookup.callId, content: 'Order 7: shipped Monday.' },
    ],
  });

  // 2. notify is off from this call on: OpenAI's allowed_tools leave it out, Anthropic still offers it.
  const second = await step(h, sessionId, format);
  expect(second.rows.map((r) => [r.kind, r.source])).toEqual([['tools', 'tool']]);
  if (second.request.tools !== undefined) expect(second.request.tools).toHaveLength(3);
  const notifyTurn = await model(second);
  const notify = notifyTurn.toolCalls[0]!;
  expect(notify.name).toBe('notify');
  expect(await json(h, 'POST', `${base}/tool-calls`, { callId: notify.callId, name: 'notify' })).toEqual({
    execute: false,
    reason: 'tool_inactive',
  });
  await json(h, 'POST', `${base}/messages`, {
    messages: [{ role: 'assistant', content: notifyTurn.content, toolCalls: notifyTurn.toolCalls }],
  });

  // 3. ctxflow answers the refused call (tool_inactive) itself; the model answers in text.
  const third = await step(h, sessionId, format);
  const answer = await model(third);
  expect(answer).toEqual({ content: 'Order 7 shipped.', toolCalls: [] });
  await json(h, 'POST', `${base}/messages`, { role: 'assistant', content: answer.content });

  // 4. A signed update of the subscribed ticket; once step-context applied it, the next call
  //    carries it as a hook notice row, placed as the format places context rows.
  const delivery = await embedded.app.inject({
    method: 'POST',
    url: '/feeds/generic',
    ...signed({ eventId: `loops-${format}`, ticket: 'T-7', summary: TICKET_NEWS, version: 1 }),
  });
  expect(delivery.statusCode, delivery.body).toBe(202);
  await landed(embedded.feedStreams);

  // 5. Forced completion: the completion tool is forced, the model calls it.
  await json(h, 'POST', `${base}/messages`, { role: 'user', content: 'Close the ticket.' });
  const forced = await step(h, sessionId, format, 'forced_completion');
  expect(forced.rows.map((r) => [r.kind, r.source])).toEqual([['notice', 'hook']]);
  const finish = await model(forced);
  expect(finish.toolCalls.map((c) => c.name)).toEqual(['__finish__']);
  await json(h, 'POST', `${base}/messages`, {
    messages: [{ role: 'assistant', content: finish.content, toolCalls: finish.toolCalls }],
  });

  // 6. Rewind to the second step: the next request extends the second step's request.
  await json(h, 'POST', `${base}/rewind`, { toStepId: second.stepId });
  const rewound = await step(h, sessionId, format);
  await model(rewound);

  // Every request was accepted by the stand-in (the API's documented rules) ...
  expect(standIn.requests.slice(from).map((r) => [r.api, r.status, r.error])).toEqual(
    answers.map(() => [format, 200, undefined]),
  );
  // ... and each is the previous one's prefix, in what the provider caches (S5 per format);
  // after the rewind, the previous request is the rewind point's.
  const prefix = cachedPrefix[format];
  const shares = [
    prefixShare(prefix(answers[0]!.request), prefix(answers[1]!.request)),
    prefixShare(prefix(answers[1]!.request), prefix(answers[2]!.request)),
    prefixShare(prefix(answers[2]!.request), prefix(answers[3]!.request)),
    prefixShare(prefix(answers[1]!.request), prefix(answers[4]!.request)),
  ];
  expect(shares).toEqual([1, 1, 1, 1]);
  expect(answers.map((a) => a.cache.rebuilt)).toEqual([true, false, false, false, false]);

  // The format-specific shape of what was sent.
  checkShape(format, answers);
}

/** Waits until step-context applied the first update published on the ticket-updates topic. */
async function landed(feedStreams: EmbeddedApp['feedStreams']) {
  for (let i = 0; i < 400; i++) {
    const at = await feedStreams.resumeFrom(TOPICS.ticketUpdates, 0);
    if (at !== undefined && BigInt(at) > 0n) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error('the ticket update was not applied');
}

/** The rules each format is built around, read from the step answers the loop sent. */
function checkShape<F extends ProviderFormat>(format: F, answers: StepAnswer<F>[]): void {
  const [first, second, third, forced, rewound] = [answers[0]!, answers[1]!, answers[2]!, answers[3]!, answers[4]!];
  // The forced call's last two conversation items: the user's message, then the ticket update.
  const tail = 'messages' in forced.request ? forced.request.messages.slice(-2) : forced.request.input.slice(-2);
  if (format === 'openai-chat') {
    expect(first.request).toMatchObject({
      tool_choice: {
        type: 'allowed_tools',
        allowed_tools: {
          mode: 'auto',
          tools: ['lookup', 'notify', '__finish__'].map((name) => ({ type: 'function', function: { name } })),
        },
      },
      prompt_cache_key: first.cache.key,
    });
    expect(second.request).toMatchObject({
      tool_choice: {
        allowed_tools: { tools: ['lookup', '__finish__'].map((name) => ({ type: 'function', function: { name } })) },
      },
    });
    expect(third.request).toMatchObject({
      messages: expect.arrayContaining([
        {
          role: 'tool',
          tool_call_id: expect.any(String),
          content: 'Not executed (tool_inactive): the tool notify is switched off.',
        },
      ]),
    });
    expect(forced.request).toMatchObject({ tool_choice: { type: 'function', function: { name: '__finish__' } } });
    // The ticket update: a system message after the user's message.
    expect(tail).toEqual([
      { role: 'user', content: 'Close the ticket.' },
      { role: 'system', content: expect.stringContaining(TICKET_NEWS) },
    ]);
  } else if (format === 'openai-responses') {
    expect(second.request).toMatchObject({
      tool_choice: {
        type: 'allowed_tools',
        mode: 'auto',
        tools: [
          { type: 'function', name: 'lookup' },
          { type: 'function', name: '__finish__' },
        ],
      },
      prompt_cache_key: second.cache.key,
    });
    expect(third.request).toMatchObject({
      input: expect.arrayContaining([
        {
          type: 'function_call_output',
          call_id: expect.any(String),
          output: 'Not executed (tool_inactive): the tool notify is switched off.',
        },
      ]),
    });
    expect(forced.request).toMatchObject({ tool_choice: { type: 'function', name: '__finish__' } });
    // The ticket update: a system message item after the user's message.
    expect(tail).toEqual([
      { type: 'message', role: 'user', content: 'Close the ticket.' },
      { type: 'message', role: 'system', content: expect.stringContaining(TICKET_NEWS) },
    ]);
  } else {
    expect(second.request).toMatchObject({
      system: [{ type: 'text', text: 'You are the order desk.', cache_control: { type: 'ephemeral' } }],
      tools: [{ name: 'lookup' }, { name: 'notify' }, { name: '__finish__' }],
      tool_choice: { type: 'auto' },
    });
    expect(forced.request).toMatchObject({ tool_choice: { type: 'tool', name: '__finish__' } });
    // The ticket update: a text block of the user turn that holds the user's message.
    expect(tail.at(-1)).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'Close the ticket.' },
        { type: 'text', text: expect.stringContaining(TICKET_NEWS), cache_control: { type: 'ephemeral' } },
      ],
    });
  }
  expect(rewound.cache.previousEnd).toBeGreaterThan(0);
}
