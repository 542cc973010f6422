/**
 * A local stand-in for three model provider APIs, for tests with the official SDK clients
 * (pointed at it by `baseURL`): a node http server on 127.0.0.1, port 0, answering
 *
 *   POST /v1/chat/completions   (OpenAI Chat Completions)
 *   POST /v1/responses          (OpenAI Responses)
 *   POST /v1/messages           (Anthropic Messages)
 *
 * with the next scripted model turn (a text, tool calls, or both), in each API's response
 * shape. It first checks the request body against the rules each API documents, and refuses
 * a body that breaks one with HTTP 400 in that API's error shape:
 *
 *   OpenAI:    {"error":{"message","type":"invalid_request_error","param","code"}}
 *   Anthropic: {"type":"error","error":{"type":"invalid_request_error","message"}}
 *
 * Checked (the API's own wording where it has one): unknown top-level parameters and unknown
 * message / item / block fields; roles; content presence (an assistant message without content
 * needs tool calls; Anthropic: no empty or whitespace-only text, no empty content); tool call
 * and result pairing (a result answers a call of the turn just before it, every call has
 * exactly one result before the next turn, Anthropic results first in the next user turn);
 * Anthropic turns alternate; tool definitions (name `^[A-Za-z0-9_-]{1,64}$`, unique, the schema
 * an object schema, present where the API requires it, OpenAI strict schemas closed and fully
 * required); `tool_choice` only with tools, naming declared tools (allowed_tools too);
 * `prompt_cache_key` at most 64 characters; at most 4 `cache_control` breakpoints.
 *
 * Every request is recorded (path, body, and the status answered), refused ones too.
 *
 * It caches prompts as the providers do, and reports it in each answer's `usage`
 * (promptCache below): a request is a sequence of tokens, one per UTF-8 byte of what the
 * provider caches in its order (tools, then system, then the conversation; `cache_control`
 * dropped; Anthropic one line per block), and it reads from the cache the longest prefix it
 * shares with an earlier request of the same cache key (the API, the model and
 * `prompt_cache_key`):
 *
 *   OpenAI:    from 1,024 tokens on, in steps of 128; `prompt_tokens` / `input_tokens` count
 *              every input token, `*_tokens_details.cached_tokens` the cached ones
 *   Anthropic: up to a block boundary, from 1,024 tokens on; the rest of the request is
 *              written (the last block carries a breakpoint): `cache_read_input_tokens`,
 *              `cache_creation_input_tokens`, `input_tokens` 0 (nothing after the breakpoint),
 *              or all of it `input_tokens` below 1,024
 *
 * Longer than 400 lines: the documented request rules of three provider APIs, which the loops' tests need all at once behind one server.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sendAnthropicStream } from './anthropic-stream.ts';

export type StandInApi = 'openai-chat' | 'openai-responses' | 'anthropic';

/** A scripted model turn. `arguments`: the call's input object (sent as JSON text to OpenAI clients). */
export interface ScriptedTurn {
  text?: string;
  toolCalls?: { name: string; arguments: Record<string, unknown>; id?: string }[];
}

export interface RecordedRequest {
  api: StandInApi;
  body: unknown;
  headers: IncomingMessage['headers'];
  status: number;
  /** The refusal's message when status is 400. */
  error?: string;
  /** An answered request's input tokens and those read from the cache (as its `usage` says). */
  tokens?: { input: number; cached: number };
}

export interface ProviderStandIn {
  /** `http://127.0.0.1:<port>`: the Anthropic client's baseURL; OpenAI clients take `${origin}/v1`. */
  origin: string;
  /** Every request, in arrival order. */
  requests: RecordedRequest[];
  /** Queues the next model turns (answered in order; an empty queue answers the text "done"). */
  script(...turns: ScriptedTurn[]): void;
  close(): Promise<void>;
}

/** A refusal: the message names the rule, `param` the place (OpenAI reports it). */
class Invalid extends Error {
  readonly param: string | null;
  constructor(message: string, param: string | null = null) {
    super(message);
    this.param = param;
  }
}

type Json = Record<string, unknown>;

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function expectObject(value: unknown, at: string): Json {
  if (!isObject(value)) throw new Invalid(`${at}: expected an object`, at);
  return value;
}

function expectString(value: unknown, at: string): string {
  if (typeof value !== 'string') throw new Invalid(`${at}: expected a string`, at);
  return value;
}

function onlyKeys(value: Json, allowed: readonly string[], at: string): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      throw new Invalid(
        at === ''
          ? `Unrecognized request argument supplied: ${key}`
          : `${at}: Extra inputs are not permitted ('${key}')`,
        at === '' ? key : `${at}.${key}`,
      );
    }
  }
}

/** `parameters` / `input_schema`: an object schema; with `strict`, closed and every property required. */
function checkSchema(schema: unknown, at: string, strict: boolean): void {
  if (!isObject(schema) || schema.type !== 'object') {
    throw new Invalid(`Invalid schema for function at ${at}: schema must be a JSON Schema of 'type: "object"'`, at);
  }
  if (strict) {
    if (schema.additionalProperties !== false) {
      throw new Invalid(
        `Invalid schema at ${at}: 'additionalProperties' is required to be supplied and to be false`,
        at,
      );
    }
    const properties = isObject(schema.properties) ? Object.keys(schema.properties) : [];
    const required = Array.isArray(schema.required) ? schema.required : [];
    const missing = properties.filter((p) => !required.includes(p));
    if (missing.length > 0) {
      throw new Invalid(
        `Invalid schema at ${at}: 'required' must include every key in properties. Missing '${missing[0]}'`,
        at,
      );
    }
  }
}

function checkToolName(name: unknown, at: string, seen: Set<string>): string {
  const text = expectString(name, at);
  if (!TOOL_NAME.test(text)) throw new Invalid(`${at}: string does not match pattern '^[a-zA-Z0-9_-]{1,64}$'`, at);
  if (seen.has(text)) throw new Invalid(`${at}: tool names must be unique ('${text}')`, at);
  seen.add(text);
  return text;
}

function checkCacheKey(body: Json): void {
  if (body.prompt_cache_key === undefined || body.prompt_cache_key === null) return;
  const key = expectString(body.prompt_cache_key, 'prompt_cache_key');
  if (key.length > 64)
    throw new Invalid('prompt_cache_key: string too long, at most 64 characters', 'prompt_cache_key');
}

/* ---------------------------------------------------------------------------------------- */
/* OpenAI Chat Completions                                                                  */
/* ---------------------------------------------------------------------------------------- */

const CHAT_PARAMS = [
  'model',
  'messages',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'prompt_cache_key',
  'prompt_cache_retention',
  'safety_identifier',
  'temperature',
  'top_p',
  'max_tokens',
  'max_completion_tokens',
  'stream',
  'stream_options',
  'store',
  'metadata',
  'user',
  'n',
  'seed',
  'stop',
  'response_format',
  'reasoning_effort',
  'service_tier',
  'verbosity',
] as const;

function checkChat(body: Json): void {
  onlyKeys(body, CHAT_PARAMS, '');
  expectString(body.model, 'model');
  checkCacheKey(body);
  const declared = new Set<string>();
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) throw new Invalid('tools: expected an array', 'tools');
    body.tools.forEach((t, i) => {
      const tool = expectObject(t, `tools[${i}]`);
      onlyKeys(tool, ['type', 'function'], `tools[${i}]`);
      if (tool.type !== 'function') throw new Invalid(`tools[${i}].type: expected 'function'`, `tools[${i}].type`);
      const fn = expectObject(tool.function, `tools[${i}].function`);
      onlyKeys(fn, ['name', 'description', 'parameters', 'strict'], `tools[${i}].function`);
      checkToolName(fn.name, `tools[${i}].function.name`, declared);
      if (fn.parameters !== undefined)
        checkSchema(fn.parameters, `tools[${i}].function.parameters`, fn.strict === true);
      else if (fn.strict === true) throw new Invalid(`tools[${i}].function: strict requires parameters`, `tools[${i}]`);
    });
  }
  if (body.tool_choice !== undefined) {
    if (declared.size === 0) {
      throw new Invalid(
        "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
        'tool_choice',
      );
    }
    const choice = body.tool_choice;
    if (typeof choice === 'string') {
      if (!['none', 'auto', 'required'].includes(choice))
        throw new Invalid('tool_choice: invalid value', 'tool_choice');
    } else {
      const c = expectObject(choice, 'tool_choice');
      const named = (ref: unknown, at: string) => {
        const r = expectObject(ref, at);
        if (r.type !== 'function') throw new Invalid(`${at}.type: expected 'function'`, at);
        const name = expectString(expectObject(r.function, `${at}.function`).name, `${at}.function.name`);
        if (!declared.has(name)) throw new Invalid(`${at}: tool '${name}' is not in tools`, at);
      };
      if (c.type === 'allowed_tools') {
        const allowed = expectObject(c.allowed_tools, 'tool_choice.allowed_tools');
        if (allowed.mode !== 'auto' && allowed.mode !== 'required') {
          throw new Invalid(
            'tool_choice.allowed_tools.mode: expected auto or required',
            'tool_choice.allowed_tools.mode',
          );
        }
        if (!Array.isArray(allowed.tools) || allowed.tools.length === 0) {
          throw new Invalid(
            'tool_choice.allowed_tools.tools: expected a non-empty array',
            'tool_choice.allowed_tools.tools',
          );
        }
        for (const [i, t] of allowed.tools.entries()) named(t, `tool_choice.allowed_tools.tools[${i}]`);
      } else named(c, 'tool_choice');
    }
  }
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    throw new Invalid("'messages' must be a non-empty array", 'messages');
  }
  let open: string[] = [];
  let turn: Set<string> = new Set();
  body.messages.forEach((m, i) => {
    const at = `messages[${i}]`;
    const message = expectObject(m, at);
    if (message.role !== 'tool' && open.length > 0) {
      throw new Invalid(
        `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${open.join(', ')}`,
        `${at}.role`,
      );
    }
    switch (message.role) {
      case 'system':
      case 'developer':
      case 'user':
        onlyKeys(message, ['role', 'content', 'name'], at);
        expectString(message.content, `${at}.content`);
        turn = new Set();
        return;
      case 'assistant': {
        onlyKeys(message, ['role', 'content', 'tool_calls', 'name', 'refusal'], at);
        const calls = message.tool_calls;
        if (calls !== undefined && (!Array.isArray(calls) || calls.length === 0)) {
          throw new Invalid(`${at}.tool_calls: expected a non-empty array`, `${at}.tool_calls`);
        }
        if (message.content === undefined || message.content === null) {
          if (calls === undefined) {
            throw new Invalid(`${at}.content: content is required unless tool_calls is specified`, `${at}.content`);
          }
        } else expectString(message.content, `${at}.content`);
        turn = new Set();
        open = [];
        for (const [j, c] of (calls ?? []).entries()) {
          const call = expectObject(c, `${at}.tool_calls[${j}]`);
          onlyKeys(call, ['id', 'type', 'function'], `${at}.tool_calls[${j}]`);
          const id = expectString(call.id, `${at}.tool_calls[${j}].id`);
          if (call.type !== 'function') throw new Invalid(`${at}.tool_calls[${j}].type: expected 'function'`);
          const fn = expectObject(call.function, `${at}.tool_calls[${j}].function`);
          onlyKeys(fn, ['name', 'arguments'], `${at}.tool_calls[${j}].function`);
          expectString(fn.name, `${at}.tool_calls[${j}].function.name`);
          expectString(fn.arguments, `${at}.tool_calls[${j}].function.arguments`);
          turn.add(id);
          open.push(id);
        }
        return;
      }
      case 'tool': {
        onlyKeys(message, ['role', 'content', 'tool_call_id'], at);
        expectString(message.content, `${at}.content`);
        const id = expectString(message.tool_call_id, `${at}.tool_call_id`);
        if (!turn.has(id) || !open.includes(id)) {
          throw new Invalid(
            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
            `${at}.role`,
          );
        }
        open = open.filter((c) => c !== id);
        return;
      }
      default:
        throw new Invalid(`${at}.role: expected one of system, developer, user, assistant, tool`, `${at}.role`);
    }
  });
  if (open.length > 0) {
    throw new Invalid(
      `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${open.join(', ')}`,
      'messages',
    );
  }
}

/* ---------------------------------------------------------------------------------------- */
/* OpenAI Responses                                                                         */
/* ---------------------------------------------------------------------------------------- */

const RESPONSES_PARAMS = [
  'model',
  'input',
  'instructions',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'prompt_cache_key',
  'prompt_cache_retention',
  'safety_identifier',
  'previous_response_id',
  'temperature',
  'top_p',
  'max_output_tokens',
  'stream',
  'stream_options',
  'store',
  'metadata',
  'user',
  'include',
  'reasoning',
  'text',
  'truncation',
  'service_tier',
  'background',
] as const;

/** A message's content: a string, or a non-empty list of text parts (`output_text` for the assistant, else `input_text`). */
function checkResponsesContent(content: unknown, role: string, at: string): void {
  if (typeof content === 'string') return;
  if (!Array.isArray(content) || content.length === 0)
    throw new Invalid(`${at}: expected a string or a list of parts`, at);
  const kind = role === 'assistant' ? 'output_text' : 'input_text';
  content.forEach((part, j) => {
    const p = expectObject(part, `${at}[${j}]`);
    onlyKeys(p, kind === 'output_text' ? ['type', 'text', 'annotations'] : ['type', 'text'], `${at}[${j}]`);
    if (p.type !== kind) throw new Invalid(`${at}[${j}].type: expected '${kind}'`, `${at}[${j}].type`);
    expectString(p.text, `${at}[${j}].text`);
  });
}

function checkResponses(body: Json): void {
  onlyKeys(body, RESPONSES_PARAMS, '');
  expectString(body.model, 'model');
  checkCacheKey(body);
  if (body.instructions !== undefined && body.instructions !== null) expectString(body.instructions, 'instructions');
  const declared = new Set<string>();
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) throw new Invalid('tools: expected an array', 'tools');
    body.tools.forEach((t, i) => {
      const tool = expectObject(t, `tools[${i}]`);
      onlyKeys(tool, ['type', 'name', 'description', 'parameters', 'strict'], `tools[${i}]`);
      if (tool.type !== 'function') throw new Invalid(`tools[${i}].type: expected 'function'`, `tools[${i}].type`);
      checkToolName(tool.name, `tools[${i}].name`, declared);
      if (!('parameters' in tool))
        throw new Invalid(`Missing required parameter: 'tools[${i}].parameters'.`, `tools[${i}].parameters`);
      if (!('strict' in tool))
        throw new Invalid(`Missing required parameter: 'tools[${i}].strict'.`, `tools[${i}].strict`);
      if (tool.parameters !== null) checkSchema(tool.parameters, `tools[${i}].parameters`, tool.strict === true);
      else if (tool.strict === true) throw new Invalid(`tools[${i}]: strict requires parameters`, `tools[${i}]`);
    });
  }
  if (body.tool_choice !== undefined) {
    if (declared.size === 0) {
      throw new Invalid("Tool choice is only allowed when 'tools' are specified.", 'tool_choice');
    }
    const choice = body.tool_choice;
    if (typeof choice === 'string') {
      if (!['none', 'auto', 'required'].includes(choice))
        throw new Invalid('tool_choice: invalid value', 'tool_choice');
    } else {
      const c = expectObject(choice, 'tool_choice');
      const named = (ref: unknown, at: string) => {
        const r = expectObject(ref, at);
        if (r.type !== 'function') throw new Invalid(`${at}.type: expected 'function'`, at);
        const name = expectString(r.name, `${at}.name`);
        if (!declared.has(name)) throw new Invalid(`${at}: tool '${name}' is not in tools`, at);
      };
      if (c.type === 'allowed_tools') {
        onlyKeys(c, ['type', 'mode', 'tools'], 'tool_choice');
        if (c.mode !== 'auto' && c.mode !== 'required')
          throw new Invalid('tool_choice.mode: expected auto or required');
        if (!Array.isArray(c.tools) || c.tools.length === 0) {
          throw new Invalid('tool_choice.tools: expected a non-empty array', 'tool_choice.tools');
        }
        for (const [i, t] of c.tools.entries()) named(t, `tool_choice.tools[${i}]`);
      } else named(c, 'tool_choice');
    }
  }
  if (typeof body.input === 'string') return;
  if (!Array.isArray(body.input) || body.input.length === 0)
    throw new Invalid("'input' must be a string or a non-empty array", 'input');
  const calls = new Map<string, number>();
  const answered = new Set<string>();
  body.input.forEach((item, i) => {
    const at = `input[${i}]`;
    const it = expectObject(item, at);
    const type = it.type ?? 'message';
    if (type === 'message') {
      onlyKeys(it, ['type', 'role', 'content'], at);
      if (!['user', 'assistant', 'system', 'developer'].includes(String(it.role))) {
        throw new Invalid(
          `Invalid value: '${String(it.role)}'. Supported values are: 'assistant', 'system', 'developer', and 'user'.`,
          `${at}.role`,
        );
      }
      checkResponsesContent(it.content, String(it.role), `${at}.content`);
    } else if (type === 'function_call') {
      onlyKeys(it, ['type', 'call_id', 'name', 'arguments', 'id', 'status'], at);
      const id = expectString(it.call_id, `${at}.call_id`);
      expectString(it.name, `${at}.name`);
      expectString(it.arguments, `${at}.arguments`);
      if (calls.has(id)) throw new Invalid(`Duplicate function call with call_id ${id}.`, `${at}.call_id`);
      calls.set(id, i);
    } else if (type === 'function_call_output') {
      onlyKeys(it, ['type', 'call_id', 'output', 'id', 'status'], at);
      const id = expectString(it.call_id, `${at}.call_id`);
      expectString(it.output, `${at}.output`);
      if (!calls.has(id)) throw new Invalid(`No tool call found for function call output with call_id ${id}.`, at);
      if (answered.has(id)) throw new Invalid(`Duplicate function call output for call_id ${id}.`, at);
      answered.add(id);
    } else throw new Invalid(`${at}.type: unsupported input item type '${String(type)}'`, `${at}.type`);
  });
  for (const id of calls.keys()) {
    if (!answered.has(id)) throw new Invalid(`No tool output found for function call ${id}.`, 'input');
  }
}

/* ---------------------------------------------------------------------------------------- */
/* Anthropic Messages                                                                       */
/* ---------------------------------------------------------------------------------------- */

const ANTHROPIC_PARAMS = [
  'model',
  'max_tokens',
  'messages',
  'system',
  'tools',
  'tool_choice',
  'temperature',
  'top_p',
  'top_k',
  'stop_sequences',
  'stream',
  'metadata',
  'thinking',
  'service_tier',
  'cache_control',
  'context_management',
  'output_config',
] as const;

function checkAnthropic(body: Json, headers: IncomingMessage['headers']): void {
  if (typeof headers['anthropic-version'] !== 'string') throw new Invalid('anthropic-version: header is required');
  onlyKeys(body, ANTHROPIC_PARAMS, '');
  expectString(body.model, 'model');
  if (typeof body.max_tokens !== 'number' || !Number.isInteger(body.max_tokens) || body.max_tokens < 1) {
    throw new Invalid('max_tokens: Field required');
  }
  let breakpoints = body.cache_control === undefined || body.cache_control === null ? 0 : 1;
  const marker = (block: Json, at: string) => {
    if (block.cache_control === undefined || block.cache_control === null) return;
    const cc = expectObject(block.cache_control, `${at}.cache_control`);
    onlyKeys(cc, ['type', 'ttl'], `${at}.cache_control`);
    if (cc.type !== 'ephemeral') throw new Invalid(`${at}.cache_control.type: Input should be 'ephemeral'`);
    breakpoints += 1;
  };
  const text = (value: unknown, at: string) => {
    const block = expectObject(value, at);
    onlyKeys(block, ['type', 'text', 'cache_control', 'citations'], at);
    if (expectString(block.text, `${at}.text`).trim().length === 0) {
      throw new Invalid(`${at}: text content blocks must contain non-whitespace text`);
    }
    marker(block, at);
  };

  const declared = new Set<string>();
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) throw new Invalid('tools: Input should be a valid list');
    body.tools.forEach((t, i) => {
      const tool = expectObject(t, `tools.${i}`);
      onlyKeys(
        tool,
        ['name', 'description', 'input_schema', 'strict', 'cache_control', 'type', 'defer_loading'],
        `tools.${i}`,
      );
      checkToolName(tool.name, `tools.${i}.name`, declared);
      if (tool.input_schema === undefined) throw new Invalid(`tools.${i}.custom.input_schema: Field required`);
      checkSchema(tool.input_schema, `tools.${i}.input_schema`, tool.strict === true);
      marker(tool, `tools.${i}`);
    });
  }
  if (body.tool_choice !== undefined) {
    if (declared.size === 0) throw new Invalid('tool_choice may only be specified while providing tools.');
    const c = expectObject(body.tool_choice, 'tool_choice');
    if (c.type === 'tool') {
      const name = expectString(c.name, 'tool_choice.name');
      if (!declared.has(name)) throw new Invalid(`Tool '${name}' not found in provided tools`);
    } else if (!['auto', 'any', 'none'].includes(String(c.type))) throw new Invalid('tool_choice.type: invalid');
  }
  if (body.system !== undefined) {
    if (typeof body.system === 'string') {
      if (body.system.trim().length === 0)
        throw new Invalid('system: text content blocks must contain non-whitespace text');
    } else if (Array.isArray(body.system)) {
      for (const [i, b] of body.system.entries()) text(b, `system.${i}`);
    } else throw new Invalid('system: Input should be a valid string or list');
  }

  if (!Array.isArray(body.messages) || body.messages.length === 0)
    throw new Invalid('messages: at least one message is required');
  let previousUses: string[] = [];
  let previousRole: string | undefined;
  const useIds = new Set<string>();
  body.messages.forEach((m, i) => {
    const at = `messages.${i}`;
    const message = expectObject(m, at);
    onlyKeys(message, ['role', 'content'], at);
    const role = message.role;
    if (role !== 'user' && role !== 'assistant') throw new Invalid(`${at}.role: Input should be 'user' or 'assistant'`);
    if (role === previousRole) {
      throw new Invalid(
        `messages: roles must alternate between "user" and "assistant", but found multiple "${role}" roles in a row`,
      );
    }
    previousRole = role;
    let blocks: Json[];
    if (typeof message.content === 'string') {
      if (message.content.trim().length === 0) throw new Invalid(`${at}: all messages must have non-empty content`);
      blocks = [{ type: 'text', text: message.content }];
    } else if (Array.isArray(message.content)) {
      if (message.content.length === 0) throw new Invalid(`${at}: all messages must have non-empty content`);
      blocks = message.content.map((b, j) => expectObject(b, `${at}.content.${j}`));
    } else throw new Invalid(`${at}.content: Input should be a valid string or list`);

    const uses: string[] = [];
    const results: string[] = [];
    let resultsOpen = true;
    blocks.forEach((block, j) => {
      const bat = `${at}.content.${j}`;
      if (block.type === 'text') {
        text(block, bat);
        resultsOpen = false;
      } else if (block.type === 'tool_use') {
        if (role !== 'assistant') throw new Invalid(`${bat}: tool_use blocks are only allowed in assistant messages`);
        onlyKeys(block, ['type', 'id', 'name', 'input', 'cache_control'], bat);
        const id = expectString(block.id, `${bat}.id`);
        expectString(block.name, `${bat}.name`);
        expectObject(block.input, `${bat}.input`);
        if (useIds.has(id)) throw new Invalid(`${bat}: tool_use ids must be unique (${id})`);
        useIds.add(id);
        uses.push(id);
        marker(block, bat);
      } else if (block.type === 'tool_result') {
        if (role !== 'user') throw new Invalid(`${bat}: tool_result blocks are only allowed in user messages`);
        onlyKeys(block, ['type', 'tool_use_id', 'content', 'is_error', 'cache_control'], bat);
        const id = expectString(block.tool_use_id, `${bat}.tool_use_id`);
        if (!previousUses.includes(id)) {
          throw new Invalid(
            `${bat}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`,
          );
        }
        if (!resultsOpen)
          throw new Invalid(`${bat}: tool_result blocks must come first in the user message, before any other content`);
        if (results.includes(id)) throw new Invalid(`${bat}: duplicate tool_result for tool_use_id ${id}`);
        results.push(id);
        if (block.content !== undefined) {
          if (typeof block.content === 'string') {
            if (block.content.length === 0) throw new Invalid(`${bat}.content: text content blocks must be non-empty`);
          } else if (Array.isArray(block.content)) {
            for (const [k, b] of block.content.entries()) text(b, `${bat}.content.${k}`);
          } else throw new Invalid(`${bat}.content: Input should be a valid string or list`);
        }
        marker(block, bat);
      } else throw new Invalid(`${bat}.type: unsupported block type '${String(block.type)}'`);
    });
    const missing = previousUses.filter((id) => !results.includes(id));
    if (missing.length > 0) {
      throw new Invalid(
        `messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`,
      );
    }
    previousUses = uses;
  });
  if (previousUses.length > 0) {
    throw new Invalid(
      `messages: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${previousUses.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`,
    );
  }
  if (breakpoints > 4)
    throw new Invalid(`A maximum of 4 blocks with cache_control may be provided. Found ${breakpoints}.`);
}

/* ---------------------------------------------------------------------------------------- */
/* The prompt cache                                                                         */
/* ---------------------------------------------------------------------------------------- */

/** The providers cache nothing shorter (OpenAI; Anthropic's smallest minimum) ... */
const CACHE_MIN_TOKENS = 1024;
/** ... and OpenAI reads it in steps of this many tokens. */
const OPENAI_CACHE_STEP = 128;

const unmarked = (value: unknown): string =>
  JSON.stringify(value, (key, v) => (key === 'cache_control' ? undefined : v)) ?? '-';

/** What the provider caches of a request, in its order, as lines: the tokens are their bytes. */
function cachedLines(api: StandInApi, body: Json): string[] {
  if (api === 'anthropic') {
    const lines = [`${unmarked([body.tools ?? null, body.system ?? null])}\n`];
    for (const m of (body.messages ?? []) as Json[]) {
      for (const b of m.content as unknown[]) lines.push(`${unmarked([m.role, b])}\n`);
    }
    return lines;
  }
  const conversation = (api === 'openai-chat' ? body.messages : body.input) as unknown[];
  return [`${unmarked(body.tools ?? null)}\n`, unmarked(conversation).slice(0, -1)];
}

/** Bytes `a` and `b` share from their start; with `lines`, only up to a line's end (a block boundary). */
function sharedPrefix(a: string[], b: string[], lines: boolean): number {
  let bytes = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] === b[i]) {
      bytes += Buffer.byteLength(a[i]!);
      continue;
    }
    if (lines) return bytes;
    const x = Buffer.from(a[i]!);
    const y = Buffer.from(b[i]!);
    let j = 0;
    while (j < x.length && j < y.length && x[j] === y[j]) j++;
    return bytes + j;
  }
  return bytes;
}

/** The cache: per cache key, every request it stored. Answers a request's usage and stores it. */
function promptCache() {
  const entries = new Map<string, string[][]>();
  return (api: StandInApi, body: Json): { input: number; cached: number; written: number } => {
    const lines = cachedLines(api, body);
    const input = lines.reduce((n, line) => n + Buffer.byteLength(line), 0);
    const key = `${api}\u0000${String(body.model)}\u0000${String(body.prompt_cache_key ?? '')}`;
    const stored = entries.get(key) ?? [];
    let shared = 0;
    for (const earlier of stored) shared = Math.max(shared, sharedPrefix(earlier, lines, api === 'anthropic'));
    if (input >= CACHE_MIN_TOKENS) entries.set(key, [...stored, lines]);
    if (shared < CACHE_MIN_TOKENS) shared = 0;
    if (api === 'anthropic') return { input, cached: shared, written: input >= CACHE_MIN_TOKENS ? input - shared : 0 };
    const cached = shared === 0 ? 0 : shared - ((shared - CACHE_MIN_TOKENS) % OPENAI_CACHE_STEP);
    return { input, cached, written: 0 };
  };
}

type CacheUse = ReturnType<ReturnType<typeof promptCache>>;

/* ---------------------------------------------------------------------------------------- */
/* Answers                                                                                  */
/* ---------------------------------------------------------------------------------------- */

function chatAnswer(model: string, turn: ScriptedTurn, ids: () => string, cache: CacheUse) {
  const calls = turn.toolCalls ?? [];
  return {
    id: `chatcmpl-${randomUUID()}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: turn.text ?? null,
          refusal: null,
          ...(calls.length > 0
            ? {
                tool_calls: calls.map((c) => ({
                  id: c.id ?? ids(),
                  type: 'function',
                  function: { name: c.name, arguments: JSON.stringify(c.arguments) },
                })),
              }
            : {}),
        },
        finish_reason: calls.length > 0 ? 'tool_calls' : 'stop',
        logprobs: null,
      },
    ],
    usage: {
      prompt_tokens: cache.input,
      completion_tokens: 1,
      total_tokens: cache.input + 1,
      prompt_tokens_details: { cached_tokens: cache.cached, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0 },
    },
  };
}

function responsesAnswer(model: string, turn: ScriptedTurn, ids: () => string, cache: CacheUse) {
  const output: Json[] = [];
  if (turn.text !== undefined) {
    output.push({
      type: 'message',
      id: `msg_${randomUUID()}`,
      status: 'completed',
      role: 'assistant',
      content: [{ type: 'output_text', text: turn.text, annotations: [] }],
    });
  }
  for (const c of turn.toolCalls ?? []) {
    output.push({
      type: 'function_call',
      id: `fc_${randomUUID()}`,
      call_id: c.id ?? ids(),
      name: c.name,
      arguments: JSON.stringify(c.arguments),
      status: 'completed',
    });
  }
  return {
    id: `resp_${randomUUID()}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status: 'completed',
    model,
    output,
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
    error: null,
    incomplete_details: null,
    instructions: null,
    metadata: {},
    temperature: 1,
    top_p: 1,
    usage: {
      input_tokens: cache.input,
      input_tokens_details: { cached_tokens: cache.cached },
      output_tokens: 1,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: cache.input + 1,
    },
  };
}

function anthropicAnswer(model: string, turn: ScriptedTurn, ids: () => string, cache: CacheUse) {
  const content: Json[] = [];
  if (turn.text !== undefined) content.push({ type: 'text', text: turn.text, citations: null });
  for (const c of turn.toolCalls ?? [])
    content.push({ type: 'tool_use', id: c.id ?? ids(), name: c.name, input: c.arguments });
  return {
    id: `msg_${randomUUID()}`,
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: (turn.toolCalls ?? []).length > 0 ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: {
      input_tokens: cache.input - cache.cached - cache.written,
      output_tokens: 1,
      cache_creation_input_tokens: cache.written,
      cache_read_input_tokens: cache.cached,
    },
  };
}

const ROUTES: Record<string, StandInApi> = {
  '/v1/chat/completions': 'openai-chat',
  '/v1/responses': 'openai-responses',
  '/v1/messages': 'anthropic',
};

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Starts the stand-in on 127.0.0.1 (port 0). */
export async function startProviderStandIn(): Promise<ProviderStandIn> {
  const requests: RecordedRequest[] = [];
  const queue: ScriptedTurn[] = [];
  const cache = promptCache();
  let seq = 0;
  const server = createServer(async (req, res) => {
    const api = req.method === 'POST' ? ROUTES[(req.url ?? '').split('?')[0]!] : undefined;
    if (api === undefined) return send(res, 404, { error: { message: 'not found', type: 'invalid_request_error' } });
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      body = undefined;
    }
    const record: RecordedRequest = { api, body, headers: req.headers, status: 200 };
    requests.push(record);
    try {
      const json = expectObject(body, 'body');
      if (api === 'openai-chat') checkChat(json);
      else if (api === 'openai-responses') checkResponses(json);
      else checkAnthropic(json, req.headers);
      const turn = queue.shift() ?? { text: 'done' };
      const ids = () => {
        seq += 1;
        return api === 'anthropic' ? `toolu_${seq}` : `call_${seq}`;
      };
      const model = String(json.model);
      const use = cache(api, json);
      record.tokens = { input: use.input, cached: use.cached };
      if (api === 'openai-chat') return send(res, 200, chatAnswer(model, turn, ids, use));
      if (api === 'openai-responses') return send(res, 200, responsesAnswer(model, turn, ids, use));
      const answer = anthropicAnswer(model, turn, ids, use);
      return json.stream === true ? sendAnthropicStream(res, answer) : send(res, 200, answer);
    } catch (err) {
      if (!(err instanceof Invalid)) throw err;
      record.status = 400;
      record.error = err.message;
      if (api === 'anthropic') {
        return send(res, 400, { type: 'error', error: { type: 'invalid_request_error', message: err.message } });
      }
      return send(res, 400, {
        error: { message: err.message, type: 'invalid_request_error', param: err.param, code: null },
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    script: (...turns) => {
      queue.push(...turns);
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}
