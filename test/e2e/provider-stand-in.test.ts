/**
 * The provider stand-in (test/support/provider-stand-in.ts) refuses what each API documents
 * as invalid, in that API's error shape, and answers a scripted turn the official SDKs
 * parse; the converters' bodies pass it through the SDKs with no cast.
 */
import Anthropic from '@anthropic-ai/sdk';
import type { CacheHints, ModelRequest } from '@ctxflow/contracts';
import { toAnthropic, toOpenAIChat, toOpenAIResponses } from '@ctxflow/session-runner';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ProviderStandIn, startProviderStandIn } from '../support/provider-stand-in.ts';

let standIn: ProviderStandIn;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  standIn = await startProviderStandIn();
  openai = new OpenAI({ apiKey: 'test', baseURL: `${standIn.origin}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'test', baseURL: standIn.origin, maxRetries: 0 });
});
afterAll(() => standIn.close());

async function post(path: string, body: unknown): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${standIn.origin}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

const SCHEMA = { type: 'object', properties: { id: { type: 'integer' } }, required: ['id'] };
const CHAT_TOOL = { type: 'function', function: { name: 'lookup', parameters: SCHEMA } };
const CALL = { id: 'c1', type: 'function', function: { name: 'lookup', arguments: '{"id":1}' } };

const chatRefusals: [string, unknown, RegExp][] = [
  [
    'the neutral request as it is',
    { model: 'm', messages: [{ role: 'tool', content: 'x', callId: 'c1', name: 'lookup' }] },
    /Extra inputs/,
  ],
  [
    'an unknown parameter',
    { model: 'm', messages: [{ role: 'user', content: 'hi' }], system: 'x' },
    /Unrecognized request argument supplied: system/,
  ],
  [
    'a tool message with no call before it',
    {
      model: 'm',
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'tool', content: 'r', tool_call_id: 'c1' },
      ],
    },
    /must be a response to a preceeding message with 'tool_calls'/,
  ],
  [
    'a call left without its result before the next message',
    {
      model: 'm',
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: null, tool_calls: [CALL] },
        { role: 'user', content: 'next' },
      ],
    },
    /did not have response messages: c1/,
  ],
  [
    'an assistant message with neither content nor tool_calls',
    {
      model: 'm',
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: null },
      ],
    },
    /content is required unless tool_calls/,
  ],
  ['an unknown role', { model: 'm', messages: [{ role: 'context', content: 'x' }] }, /role: expected one of/],
  [
    'a tool name with a dot',
    {
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [{ type: 'function', function: { name: 'a.b' } }],
    },
    /does not match pattern/,
  ],
  [
    'a strict tool with an open schema',
    {
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [{ type: 'function', function: { name: 'lookup', parameters: SCHEMA, strict: true } }],
    },
    /additionalProperties/,
  ],
  [
    'tool_choice without tools',
    { model: 'm', messages: [{ role: 'user', content: 'hi' }], tool_choice: 'auto' },
    /only allowed when 'tools' are specified/,
  ],
  [
    'an unknown tool in allowed_tools',
    {
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [CHAT_TOOL],
      tool_choice: {
        type: 'allowed_tools',
        allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'notify' } }] },
      },
    },
    /tool 'notify' is not in tools/,
  ],
  [
    'a prompt_cache_key over 64 characters',
    { model: 'm', messages: [{ role: 'user', content: 'hi' }], prompt_cache_key: 'k'.repeat(65) },
    /at most 64/,
  ],
];

const responsesRefusals: [string, unknown, RegExp][] = [
  ['a tool role item', { model: 'm', input: [{ role: 'tool', content: 'x' }] }, /Supported values are/],
  [
    'an output with no call',
    { model: 'm', input: [{ type: 'function_call_output', call_id: 'c1', output: 'x' }] },
    /No tool call found for function call output with call_id c1/,
  ],
  [
    'a call with no output',
    {
      model: 'm',
      input: [
        { role: 'user', content: 'hi' },
        { type: 'function_call', call_id: 'c1', name: 'lookup', arguments: '{}' },
      ],
    },
    /No tool output found for function call c1/,
  ],
  [
    'a tool without parameters',
    { model: 'm', input: 'hi', tools: [{ type: 'function', name: 'lookup', strict: false }] },
    /Missing required parameter: 'tools\[0\].parameters'/,
  ],
  [
    'an unknown tool in allowed_tools',
    {
      model: 'm',
      input: 'hi',
      tools: [{ type: 'function', name: 'lookup', parameters: SCHEMA, strict: false }],
      tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'function', name: 'notify' }] },
    },
    /tool 'notify' is not in tools/,
  ],
];

const USER = { role: 'user', content: [{ type: 'text', text: 'hi' }] };
const USE = { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'lookup', input: { id: 1 } }] };
const TOOL = { name: 'lookup', input_schema: SCHEMA };
const marked = (text: string) => ({ type: 'text', text, cache_control: { type: 'ephemeral' } });

const anthropicRefusals: [string, unknown, RegExp][] = [
  [
    'a system role message',
    { model: 'm', max_tokens: 1, messages: [{ role: 'system', content: 'x' }, USER] },
    /Input should be 'user' or 'assistant'/,
  ],
  ['two user turns in a row', { model: 'm', max_tokens: 1, messages: [USER, USER] }, /roles must alternate/],
  [
    'an empty text block',
    { model: 'm', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'text', text: '' }] }] },
    /non-whitespace text/,
  ],
  [
    'empty content',
    { model: 'm', max_tokens: 1, messages: [USER, { role: 'assistant', content: [] }, USER] },
    /non-empty content/,
  ],
  [
    'a tool_use without its result',
    { model: 'm', max_tokens: 1, tools: [TOOL], messages: [USER, USE, USER] },
    /without `tool_result` blocks immediately after: t1/,
  ],
  [
    'a tool_result after a text block',
    {
      model: 'm',
      max_tokens: 1,
      tools: [TOOL],
      messages: [
        USER,
        USE,
        {
          role: 'user',
          content: [
            { type: 'text', text: 'row' },
            { type: 'tool_result', tool_use_id: 't1', content: 'r' },
          ],
        },
      ],
    },
    /must come first/,
  ],
  [
    'a tool_result with no tool_use before it',
    {
      model: 'm',
      max_tokens: 1,
      messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't9', content: 'r' }] }],
    },
    /corresponding `tool_use` block in the previous message/,
  ],
  [
    'a tool without input_schema',
    { model: 'm', max_tokens: 1, tools: [{ name: 'lookup' }], messages: [USER] },
    /input_schema: Field required/,
  ],
  [
    'five cache_control breakpoints',
    {
      model: 'm',
      max_tokens: 1,
      system: [marked('a'), marked('b')],
      messages: [{ role: 'user', content: [marked('c'), marked('d'), marked('e')] }],
    },
    /A maximum of 4 blocks with cache_control may be provided. Found 5./,
  ],
  [
    'tool_choice naming an undeclared tool',
    { model: 'm', max_tokens: 1, tools: [TOOL], tool_choice: { type: 'tool', name: 'notify' }, messages: [USER] },
    /Tool 'notify' not found/,
  ],
];

describe('the provider stand-in refuses what the APIs document as invalid', () => {
  it.each(chatRefusals)('chat completions: %s', async (_name, body, message) => {
    const res = await post('/v1/chat/completions', body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      error: { type: 'invalid_request_error', message: expect.stringMatching(message) },
    });
  });

  it.each(responsesRefusals)('responses: %s', async (_name, body, message) => {
    const res = await post('/v1/responses', body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      error: { type: 'invalid_request_error', message: expect.stringMatching(message) },
    });
  });

  it.each(anthropicRefusals)('messages: %s', async (_name, body, message) => {
    const res = await post('/v1/messages', body);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      type: 'error',
      error: { type: 'invalid_request_error', message: expect.stringMatching(message) },
    });
  });

  it('the SDKs surface a refusal as a 400 error', async () => {
    await expect(
      openai.chat.completions.create({ model: 'm', messages: [{ role: 'tool', content: 'r', tool_call_id: 'c1' }] }),
    ).rejects.toMatchObject({ status: 400 });
    await expect(
      anthropic.messages.create({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: '' }] }),
    ).rejects.toMatchObject({ status: 400 });
  });
});

describe('the converters pass the stand-in through the official SDKs', () => {
  const request: ModelRequest = {
    system: 'You are the order desk.',
    model: 'test-model',
    messages: [
      { role: 'system', content: 'You are the order desk.' },
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
      {
        role: 'user',
        content: '<context kind="tools" source="tool">\ndisabled: notify\n</context>',
        row: { id: 'r1', kind: 'tools', source: 'tool' },
      },
      { role: 'tool', content: 'not executed: tool_inactive', callId: 'c2', name: 'notify' },
      {
        role: 'system',
        content: '<context kind="instruction" source="app">\nBe brief.\n</context>',
        row: { id: 'r2', kind: 'instruction', source: 'app' },
      },
    ],
    tools: [
      {
        name: 'lookup',
        description: 'Find an order',
        parameters: { ...SCHEMA, additionalProperties: false },
        strict: true,
      },
      { name: 'notify' },
      { name: '__finish__', parameters: { type: 'object', properties: { answer: { type: 'string' } } } },
    ],
    activeTools: ['lookup', '__finish__'],
    toolChoice: 'auto',
  };
  const cache: CacheHints = { rebuilt: false, reason: null, key: 'ctx-key', prefixEnd: 0, previousEnd: 1 };

  it('openai-chat, openai-responses and anthropic bodies are accepted and the scripted turn comes back', async () => {
    standIn.script({ text: 'It shipped.' }, { toolCalls: [{ name: 'lookup', arguments: { id: 8 } }] }, { text: 'ok' });
    const chat = await openai.chat.completions.create({ model: 'test-model', ...toOpenAIChat(request, cache) });
    expect(chat.choices[0]?.message.content).toBe('It shipped.');
    const resp = await openai.responses.create({ model: 'test-model', ...toOpenAIResponses(request, cache) });
    expect(resp.output).toMatchObject([{ type: 'function_call', name: 'lookup', arguments: '{"id":8}' }]);
    const msg = await anthropic.messages.create({
      model: 'test-model',
      max_tokens: 256,
      ...toAnthropic(request, cache),
    });
    expect(msg.content).toMatchObject([{ type: 'text', text: 'ok' }]);
    expect(standIn.requests.slice(-3).map((r) => [r.api, r.status])).toEqual([
      ['openai-chat', 200],
      ['openai-responses', 200],
      ['anthropic', 200],
    ]);
  });
});

describe('the stand-in streams an Anthropic answer as the API does', () => {
  it('messages.stream() reads a text and a tool call back, with the stop reason and usage', async () => {
    standIn.script({ text: 'Looking it up.', toolCalls: [{ name: 'lookup', arguments: { id: 7, tags: ['a'] } }] });
    const stream = anthropic.messages.stream({
      model: 'test-model',
      max_tokens: 256,
      tools: [{ name: 'lookup', input_schema: { ...SCHEMA, type: 'object' } }],
      context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
      output_config: { effort: 'high' },
      messages: [{ role: 'user', content: 'Where is order 7?' }],
    });
    const texts: string[] = [];
    stream.on('text', (delta) => texts.push(delta));
    const message = await stream.finalMessage();
    expect(texts).toEqual(['Looking it up.']);
    expect(message).toMatchObject({
      role: 'assistant',
      model: 'test-model',
      stop_reason: 'tool_use',
      content: [
        { type: 'text', text: 'Looking it up.' },
        { type: 'tool_use', name: 'lookup', input: { id: 7, tags: ['a'] } },
      ],
      usage: { output_tokens: 1 },
    });
    expect(standIn.requests.at(-1)).toMatchObject({ api: 'anthropic', status: 200, body: { stream: true } });
  });
});
