/**
 * The provider formats of Contract v2 (services/session-runner/src/domain/provider-formats):
 * exact bodies for hand-built neutral requests, and the prefix property per format over
 * generated sessions.
 *
 * Longer than 400 lines: the exact bodies of three formats for the same hand-built requests, side by side.
 */
import type { CacheHints, ModelRequest, RequestMessage, RequestTool, RowRef } from '@ctxflow/contracts';
import {
  ANTHROPIC_MAX_BREAKPOINTS,
  type AnthropicRequest,
  anthropicPrefix,
  chatPrefix,
  providerOrder,
  quotedTurn,
  responsesPrefix,
  toAnthropic,
  toOpenAIChat,
  toOpenAIResponses,
  weakMessageMemo,
} from '@ctxflow/session-runner';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

const SYSTEM = 'You are the order desk.';
const LOOKUP: RequestTool = {
  name: 'lookup',
  description: 'Find an order',
  parameters: {
    type: 'object',
    properties: { id: { type: 'integer' } },
    required: ['id'],
    additionalProperties: false,
  },
  strict: true,
};
const NOTIFY: RequestTool = { name: 'notify', description: 'Tell the customer' };
const FINISH: RequestTool = {
  name: '__finish__',
  description: 'End the run with an answer',
  parameters: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] },
};
const TOOLS = [LOOKUP, NOTIFY, FINISH];

const ref = (id: string, kind: RowRef['kind'], source: RowRef['source']): RowRef => ({ id, kind, source });
const SWITCH_OFF = '<context kind="tools" source="tool">\ndisabled: notify\n</context>';
const INSTRUCTION = '<context kind="instruction" source="app">\nBe brief.\n</context>';
const NOTICE = '<context kind="notice" source="hook">\nTicket 7 closed.\n</context>';
const INACTIVE = 'not executed: tool_inactive (notify is switched off)';

/**
 * A session in the middle of a run: a turn with two calls whose results have a switch-off
 * row (queued by the first call's tool) committed between them, then an app instruction,
 * the assistant's answer, a hook notice and the next user message.
 */
const MESSAGES: RequestMessage[] = [
  { role: 'system', content: SYSTEM },
  { role: 'user', content: 'Where is order 7?' },
  {
    role: 'assistant',
    content: '',
    toolCalls: [
      { callId: 'c1', name: 'lookup', arguments: '{"id":7}' },
      { callId: 'c2', name: 'notify', arguments: '{}' },
    ],
  },
  { role: 'tool', content: 'shipped', callId: 'c1', name: 'lookup' },
  { role: 'user', content: SWITCH_OFF, row: ref('r1', 'tools', 'tool') },
  { role: 'tool', content: INACTIVE, callId: 'c2', name: 'notify' },
  { role: 'system', content: INSTRUCTION, row: ref('r2', 'instruction', 'app') },
  { role: 'assistant', content: 'It shipped.' },
  { role: 'system', content: NOTICE, row: ref('r3', 'notice', 'hook') },
  { role: 'user', content: 'Thanks' },
];

const REQUEST: ModelRequest = {
  messages: MESSAGES,
  tools: TOOLS,
  activeTools: ['lookup', '__finish__'],
  system: SYSTEM,
  model: 'gpt-test',
  toolChoice: 'auto',
};
/** The previous request ended after the turn's results (6 messages: 0..5). */
const CACHE: CacheHints = { rebuilt: false, reason: null, key: 'ctx-s1', prefixEnd: 0, previousEnd: 6 };
const FORCED: ModelRequest = { ...REQUEST, toolChoice: { type: 'tool', name: '__finish__' } };
const EPHEMERAL = { type: 'ephemeral' };

describe('provider order', () => {
  it('moves a row committed between the results of a turn to right after its last result', () => {
    expect(providerOrder(MESSAGES).map((m) => ('row' in m ? m.row.id : m.role))).toEqual([
      'system',
      'user',
      'assistant',
      'tool',
      'tool',
      'r1',
      'r2',
      'assistant',
      'r3',
      'user',
    ]);
  });

  it('R3: a tool message without its call is a user turn quoting it, after the results of the turn it sits in', () => {
    const orphan: RequestMessage = { role: 'tool', content: 'Friday', callId: 'q9', name: 'ask_user' };
    const bare: RequestMessage = { role: 'tool', content: 'v1 result' };
    const messages: RequestMessage[] = [
      { role: 'user', content: 'go' },
      bare,
      { role: 'assistant', content: '', toolCalls: [{ callId: 'c1', name: 'lookup', arguments: '{}' }] },
      orphan,
      { role: 'tool', content: 'found', callId: 'c1', name: 'lookup' },
      // a second result for c1: no call is waiting for it
      { role: 'tool', content: 'again', callId: 'c1', name: 'lookup' },
    ];
    expect(providerOrder(messages)).toEqual([
      { role: 'user', content: 'go' },
      { role: 'user', content: '<tool_result>\nv1 result\n</tool_result>' },
      messages[2],
      messages[4],
      { role: 'user', content: '<tool_result callId="q9" name="ask_user">\nFriday\n</tool_result>' },
      { role: 'user', content: '<tool_result callId="c1" name="lookup">\nagain\n</tool_result>' },
    ]);
    // The same quoted message object on every request (converted once per format).
    const quote = weakMessageMemo(quotedTurn);
    expect(providerOrder(messages, quote)[1]).toBe(providerOrder(messages.slice(0, 2), quote)[1]);
    const chat = toOpenAIChat({ ...REQUEST, messages }, { ...CACHE, prefixEnd: -1, previousEnd: 0 });
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'user', 'assistant', 'tool', 'user', 'user']);
    const anthropic = toAnthropic({ ...REQUEST, messages }, { ...CACHE, prefixEnd: -1, previousEnd: 0 });
    expect(anthropic.messages[2]!.content.map((b) => b.type)).toEqual(['tool_result', 'text', 'text']);
  });

  it('returns the same array when nothing moves', () => {
    const plain = [MESSAGES[0]!, MESSAGES[1]!, MESSAGES[7]!];
    expect(providerOrder(plain)).toBe(plain);
  });
});

describe('openai-chat', () => {
  it('renders messages with tool_calls and tool_call_id, every tool with its schema, allowed_tools and the cache key', () => {
    expect(toOpenAIChat(REQUEST, CACHE)).toEqual({
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: 'Where is order 7?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'lookup', arguments: '{"id":7}' } },
            { id: 'c2', type: 'function', function: { name: 'notify', arguments: '{}' } },
          ],
        },
        { role: 'tool', content: 'shipped', tool_call_id: 'c1' },
        { role: 'tool', content: INACTIVE, tool_call_id: 'c2' },
        { role: 'user', content: SWITCH_OFF },
        { role: 'system', content: INSTRUCTION },
        { role: 'assistant', content: 'It shipped.' },
        { role: 'system', content: NOTICE },
        { role: 'user', content: 'Thanks' },
      ],
      tools: [
        {
          type: 'function',
          function: {
            name: 'lookup',
            description: 'Find an order',
            parameters: LOOKUP.parameters,
            strict: true,
          },
        },
        { type: 'function', function: { name: 'notify', description: 'Tell the customer' } },
        {
          type: 'function',
          function: { name: '__finish__', description: 'End the run with an answer', parameters: FINISH.parameters },
        },
      ],
      tool_choice: {
        type: 'allowed_tools',
        allowed_tools: {
          mode: 'auto',
          tools: [
            { type: 'function', function: { name: 'lookup' } },
            { type: 'function', function: { name: '__finish__' } },
          ],
        },
      },
      prompt_cache_key: 'ctx-s1',
    });
  });

  it('forced completion names the completion tool; the tool list is unchanged', () => {
    const body = toOpenAIChat(FORCED, CACHE);
    expect(body.tool_choice).toEqual({ type: 'function', function: { name: '__finish__' } });
    expect(body.tools).toEqual(toOpenAIChat(REQUEST, CACHE).tools);
  });

  it('no active tool gives tool_choice none; no declared tool gives neither tools nor tool_choice', () => {
    expect(toOpenAIChat({ ...REQUEST, activeTools: [] }, CACHE).tool_choice).toBe('none');
    expect(toOpenAIChat({ ...REQUEST, tools: [], activeTools: [] }, CACHE)).toEqual({
      messages: toOpenAIChat(REQUEST, CACHE).messages,
      prompt_cache_key: 'ctx-s1',
    });
  });
});

describe('openai-responses', () => {
  it('renders input items with function_call / function_call_output, the system prefix first, allowed_tools and the cache key', () => {
    expect(toOpenAIResponses(REQUEST, CACHE)).toEqual({
      input: [
        { type: 'message', role: 'system', content: SYSTEM },
        { type: 'message', role: 'user', content: 'Where is order 7?' },
        { type: 'function_call', call_id: 'c1', name: 'lookup', arguments: '{"id":7}' },
        { type: 'function_call', call_id: 'c2', name: 'notify', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: 'shipped' },
        { type: 'function_call_output', call_id: 'c2', output: INACTIVE },
        { type: 'message', role: 'user', content: SWITCH_OFF },
        { type: 'message', role: 'system', content: INSTRUCTION },
        { type: 'message', role: 'assistant', content: 'It shipped.' },
        { type: 'message', role: 'system', content: NOTICE },
        { type: 'message', role: 'user', content: 'Thanks' },
      ],
      tools: [
        {
          type: 'function',
          name: 'lookup',
          description: 'Find an order',
          parameters: LOOKUP.parameters,
          strict: true,
        },
        { type: 'function', name: 'notify', description: 'Tell the customer', parameters: null, strict: false },
        {
          type: 'function',
          name: '__finish__',
          description: 'End the run with an answer',
          parameters: FINISH.parameters,
          strict: false,
        },
      ],
      tool_choice: {
        type: 'allowed_tools',
        mode: 'auto',
        tools: [
          { type: 'function', name: 'lookup' },
          { type: 'function', name: '__finish__' },
        ],
      },
      prompt_cache_key: 'ctx-s1',
    });
  });

  it('an assistant text with calls is a message then the calls; forced completion names the tool', () => {
    const messages: RequestMessage[] = [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: 'Looking.', toolCalls: [{ callId: 'c9', name: 'lookup', arguments: '{"id":1}' }] },
      { role: 'tool', content: '', callId: 'c9', name: 'lookup' },
    ];
    const body = toOpenAIResponses({ ...FORCED, messages, system: '' }, { ...CACHE, prefixEnd: -1, previousEnd: 0 });
    expect(body.input).toEqual([
      { type: 'message', role: 'user', content: 'go' },
      { type: 'message', role: 'assistant', content: 'Looking.' },
      { type: 'function_call', call_id: 'c9', name: 'lookup', arguments: '{"id":1}' },
      { type: 'function_call_output', call_id: 'c9', output: '' },
    ]);
    expect(body.tool_choice).toEqual({ type: 'function', name: '__finish__' });
  });
});

describe('anthropic', () => {
  it('renders top-level system, alternating turns, tool_result blocks first, rows as user text blocks, three breakpoints', () => {
    expect(toAnthropic(REQUEST, CACHE)).toEqual({
      system: [{ type: 'text', text: SYSTEM, cache_control: EPHEMERAL }],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Where is order 7?' }] },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'c1', name: 'lookup', input: { id: 7 } },
            { type: 'tool_use', id: 'c2', name: 'notify', input: {} },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'c1', content: 'shipped' },
            { type: 'tool_result', tool_use_id: 'c2', content: INACTIVE },
            // the previous request's last block: read breakpoint
            { type: 'text', text: SWITCH_OFF, cache_control: EPHEMERAL },
            { type: 'text', text: INSTRUCTION },
          ],
        },
        { role: 'assistant', content: [{ type: 'text', text: 'It shipped.' }] },
        {
          role: 'user',
          content: [
            { type: 'text', text: NOTICE },
            { type: 'text', text: 'Thanks', cache_control: EPHEMERAL },
          ],
        },
      ],
      tools: [
        { name: 'lookup', description: 'Find an order', input_schema: LOOKUP.parameters, strict: true },
        {
          name: 'notify',
          description: 'Tell the customer',
          input_schema: { type: 'object', properties: {} },
        },
        { name: '__finish__', description: 'End the run with an answer', input_schema: FINISH.parameters },
      ],
      tool_choice: { type: 'auto' },
    });
  });

  it('keeps a switched-off tool offered; forced completion is tool_choice tool', () => {
    const body = toAnthropic(FORCED, CACHE);
    expect(body.tools?.map((t) => t.name)).toEqual(['lookup', 'notify', '__finish__']);
    expect(body.tool_choice).toEqual({ type: 'tool', name: '__finish__' });
  });

  it('without a system prefix: no system, the last tool is the stable breakpoint', () => {
    const body = toAnthropic(
      { ...REQUEST, system: '', messages: [{ role: 'user', content: 'hi' }] },
      { ...CACHE, prefixEnd: -1, previousEnd: 0 },
    );
    expect(body.system).toBeUndefined();
    expect(body.tools?.[2]?.cache_control).toEqual(EPHEMERAL);
    expect(body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'hi', cache_control: EPHEMERAL }] },
    ]);
  });

  it('no empty content: an empty or blank message adds nothing, an empty result has no content, bad arguments give {}', () => {
    const messages: RequestMessage[] = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: 'one' },
      { role: 'assistant', content: '' },
      { role: 'assistant', content: ' \n' },
      { role: 'user', content: '  ' },
      { role: 'user', content: 'two' },
      { role: 'assistant', content: '', toolCalls: [{ callId: 'c1', name: 'lookup', arguments: 'not json' }] },
      { role: 'tool', content: '', callId: 'c1', name: 'lookup' },
      { role: 'assistant', content: 'a' },
      { role: 'assistant', content: 'b' },
    ];
    const body = toAnthropic({ ...REQUEST, messages }, { ...CACHE, previousEnd: 0 });
    expect(body.messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'one' },
          { type: 'text', text: 'two' },
        ],
      },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'c1', name: 'lookup', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'c1' }] },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b', cache_control: EPHEMERAL },
        ],
      },
    ]);
  });

  it('a rebuilt prefix has no breakpoint at the previous end (the previous request is not its prefix)', () => {
    const body = toAnthropic(REQUEST, { ...CACHE, rebuilt: true, reason: 'model_change' });
    expect(breakpoints(body)).toBe(2);
  });
});

/* ------------------------------------------------------------------------------------------ */
/* The prefix property, per format.                                                            */
/* ------------------------------------------------------------------------------------------ */

/** What a session does between two steps (one request per element, in order). */
type Event =
  | { t: 'user'; text: string }
  | { t: 'orphan'; text: string }
  | { t: 'row'; role: 'system' | 'user'; text: string }
  | { t: 'assistant'; text: string }
  | {
      t: 'calls';
      text: string;
      calls: { args: string; result: string; rowsBefore: string[]; orphanBefore: boolean }[];
    };

const text = fc.oneof(
  fc.constant(''),
  fc.string({ maxLength: 12 }),
  fc.constantFrom('{"a":1}', '</context>', '"', ' ', '\n\t'),
);
const event: fc.Arbitrary<Event> = fc.oneof(
  fc.record({ t: fc.constant('user' as const), text }),
  fc.record({ t: fc.constant('orphan' as const), text }),
  fc.record({ t: fc.constant('row' as const), role: fc.constantFrom('system' as const, 'user' as const), text }),
  fc.record({ t: fc.constant('assistant' as const), text }),
  fc.record({
    t: fc.constant('calls' as const),
    text,
    calls: fc.array(
      fc.record({
        args: fc.constantFrom('{}', '{"id":1}', 'oops', '[1]'),
        result: text,
        rowsBefore: fc.array(text, { maxLength: 2 }),
        orphanBefore: fc.boolean(),
      }),
      { minLength: 1, maxLength: 3 },
    ),
  }),
);

/** The neutral requests of a session: one after each event, each a prefix of the next (R3). */
function session(system: string, events: Event[]): { request: ModelRequest; cache: CacheHints }[] {
  const messages: RequestMessage[] = system ? [{ role: 'system', content: system }] : [];
  const out: { request: ModelRequest; cache: CacheHints }[] = [];
  let previousEnd = 0;
  let n = 0;
  for (const e of events) {
    n += 1;
    if (e.t === 'user') messages.push({ role: 'user', content: e.text });
    else if (e.t === 'orphan') messages.push({ role: 'tool', content: e.text, callId: `x${n}`, name: 'ask_user' });
    else if (e.t === 'assistant') messages.push({ role: 'assistant', content: e.text });
    else if (e.t === 'row') messages.push({ role: e.role, content: e.text, row: ref(`r${n}`, 'notice', 'app') });
    else {
      const calls = e.calls.map((c, i) => ({ callId: `c${n}-${i}`, name: 'lookup', arguments: c.args }));
      messages.push({ role: 'assistant', content: e.text, toolCalls: calls });
      e.calls.forEach((c, i) => {
        if (c.orphanBefore) messages.push({ role: 'tool', content: c.result, callId: `o${n}-${i}` });
        for (const [j, row] of c.rowsBefore.entries()) {
          messages.push({ role: 'user', content: row, row: ref(`r${n}-${i}-${j}`, 'tools', 'tool') });
        }
        messages.push({ role: 'tool', content: c.result, callId: calls[i]!.callId, name: 'lookup' });
      });
    }
    out.push({
      request: { ...REQUEST, system, messages: messages.slice() },
      cache: { rebuilt: false, reason: null, key: 'k', prefixEnd: system ? 0 : -1, previousEnd },
    });
    previousEnd = messages.length;
  }
  return out;
}

function breakpoints(body: AnthropicRequest): number {
  const blocks = [
    ...(body.tools ?? []),
    ...(body.system ?? []),
    ...body.messages.flatMap((m): { cache_control?: unknown }[] => m.content),
  ];
  return blocks.filter((b) => b.cache_control !== undefined).length;
}

/** What is compared, and why: provider-formats/cached-prefix.ts. */
describe('S5 per format: every request of a session is a byte prefix of the next', () => {
  it('openai-chat, openai-responses and anthropic over generated sessions', () => {
    fc.assert(
      fc.property(fc.constantFrom(SYSTEM, ''), fc.array(event, { minLength: 1, maxLength: 25 }), (system, events) => {
        const steps = session(system, events);
        for (let i = 1; i < steps.length; i++) {
          const [a, b] = [steps[i - 1]!, steps[i]!];
          const chat = [chatPrefix(toOpenAIChat(a.request, a.cache)), chatPrefix(toOpenAIChat(b.request, b.cache))];
          expect(chat[1]!.stable).toBe(chat[0]!.stable);
          expect(chat[1]!.key).toBe(chat[0]!.key);
          expect(chat[1]!.conversation.startsWith(chat[0]!.conversation)).toBe(true);

          const resp = [
            responsesPrefix(toOpenAIResponses(a.request, a.cache)),
            responsesPrefix(toOpenAIResponses(b.request, b.cache)),
          ];
          expect(resp[1]!.stable).toBe(resp[0]!.stable);
          expect(resp[1]!.key).toBe(resp[0]!.key);
          expect(resp[1]!.conversation.startsWith(resp[0]!.conversation)).toBe(true);

          const an = [toAnthropic(a.request, a.cache), toAnthropic(b.request, b.cache)] as const;
          const [before, after] = [anthropicPrefix(an[0]), anthropicPrefix(an[1])];
          expect(after.stable).toBe(before.stable);
          expect(after.conversation.startsWith(before.conversation)).toBe(true);
          // The block that ended request n is a breakpoint in request n+1 (where n wrote, n+1 reads).
          const count = before.conversation.split('\n').length - 1;
          if (count > 0) {
            const blocks = an[1].messages.flatMap((m): { cache_control?: unknown }[] => m.content);
            expect(blocks[count - 1]!.cache_control).toEqual(EPHEMERAL);
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('every Anthropic body keeps the API rules: alternation, results first, no empty content, <= 4 breakpoints', () => {
    fc.assert(
      fc.property(fc.constantFrom(SYSTEM, ''), fc.array(event, { minLength: 1, maxLength: 25 }), (system, events) => {
        for (const { request, cache } of session(system, events)) {
          const body = toAnthropic(request, cache);
          expect(breakpoints(body)).toBeLessThanOrEqual(ANTHROPIC_MAX_BREAKPOINTS);
          body.messages.forEach((m, i) => {
            expect(m.content.length).toBeGreaterThan(0);
            if (i > 0) expect(m.role).not.toBe(body.messages[i - 1]!.role);
            for (const b of m.content) if (b.type === 'text') expect(b.text).toMatch(/\S/);
            const prev = body.messages[i - 1];
            const uses = prev?.role === 'assistant' ? prev.content.filter((b) => b.type === 'tool_use') : [];
            // the turn after a tool_use turn opens with one tool_result per tool_use, in order
            expect(
              m.content.slice(0, uses.length).map((b) => (b.type === 'tool_result' ? b.tool_use_id : b.type)),
            ).toEqual(uses.map((u) => (u.type === 'tool_use' ? u.id : '')));
          });
        }
      }),
      { numRuns: 300 },
    );
  });
});
