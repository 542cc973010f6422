import { randomUUID } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import type { Turn } from './stand-in-openai.ts';

/** A block of a message the stand-in reads: its type (and a tool_use's id, a tool_result's tool_use_id). */
interface Block {
  type?: string;
  id?: string;
  tool_use_id?: string;
}

/** Why Anthropic's Messages API would refuse the body (turns alternate from `user`; each tool_use answered next), or undefined. */
function refusal(body: { max_tokens?: unknown; messages?: { role: string; content: string | Block[] }[] }) {
  if (typeof body.max_tokens !== 'number') return 'max_tokens: Field required';
  const messages = body.messages ?? [];
  for (const [i, m] of messages.entries()) {
    if (m.role !== (i % 2 === 0 ? 'user' : 'assistant')) return `messages.${i}: roles must alternate from user`;
    const blocks = typeof m.content === 'string' ? [] : m.content;
    const next = messages[i + 1]?.content;
    const answered = new Set(typeof next === 'string' ? [] : (next ?? []).map((b) => b.tool_use_id));
    for (const b of blocks) {
      if (b.type === 'tool_use' && i + 1 < messages.length && !answered.has(b.id)) {
        return `messages.${i + 1}: tool_use ${b.id} has no tool_result in the next turn`;
      }
    }
  }
  return undefined;
}

/** A message as the API streams it (`stream: true`): Anthropic's server-sent events, in its order. */
function stream(res: ServerResponse, message: { content: Record<string, unknown>[]; stop_reason: string }) {
  const events: Record<string, unknown>[] = [
    { type: 'message_start', message: { ...message, content: [], stop_reason: null } },
  ];
  message.content.forEach((block, index) => {
    const tool = block.type === 'tool_use';
    events.push({
      type: 'content_block_start',
      index,
      content_block: tool ? { ...block, input: {} } : { ...block, text: '' },
    });
    const delta = tool
      ? { type: 'input_json_delta', partial_json: JSON.stringify(block.input) }
      : { type: 'text_delta', text: block.text };
    events.push({ type: 'content_block_delta', index, delta }, { type: 'content_block_stop', index });
  });
  events.push(
    {
      type: 'message_delta',
      delta: { stop_reason: message.stop_reason, stop_sequence: null },
      usage: { output_tokens: 1 },
    },
    { type: 'message_stop' },
  );
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.end(events.map((e) => `event: ${String(e.type)}\ndata: ${JSON.stringify(e)}\n\n`).join(''));
}

/**
 * A local stand-in for Anthropic's Messages API (`POST /v1/messages`, streamed when asked): answers the
 * scripted turns in order, refuses bodies the API refuses (400), keeps every request body. Not a model.
 */
export async function startAnthropicStandIn(script: Turn[]) {
  const requests: Record<string, unknown>[] = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => {
      raw += chunk;
    });
    req.on('end', () => {
      const body = JSON.parse(raw || '{}');
      requests.push(body);
      const error = refusal(body);
      if (error !== undefined) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message: error } }));
        return;
      }
      const turn = script[requests.length - 1] ?? { text: 'Done.' };
      const content = [
        ...(turn.text === undefined ? [] : [{ type: 'text', text: turn.text, citations: null }]),
        ...(turn.calls ?? []).map((c) => ({
          type: 'tool_use',
          id: `toolu_${randomUUID().slice(0, 12)}`,
          name: c.name,
          input: c.arguments,
        })),
      ];
      const message = {
        id: `msg_${randomUUID()}`,
        type: 'message',
        role: 'assistant',
        model: body.model,
        content,
        stop_reason: turn.calls?.length ? 'tool_use' : 'end_turn',
        stop_sequence: null,
        usage: { input_tokens: 1, output_tokens: 1 },
      };
      if (body.stream === true) return stream(res, message);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(message));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    baseURL: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
