/**
 * An Anthropic Messages answer as the API streams it (`stream: true`): server-sent events in
 * Anthropic's order, `message_start` (the message with no content, `stop_reason` null), per
 * content block `content_block_start` / `content_block_delta` (`text_delta`, or `input_json_delta`
 * for a tool call's input) / `content_block_stop`, then `message_delta` (the stop reason and the
 * output tokens) and `message_stop`. The provider stand-in sends it for a streaming request.
 */
import type { ServerResponse } from 'node:http';

type Json = Record<string, unknown>;

/** The answer as the non-streaming API returns it (the stand-in's `anthropicAnswer`). */
export interface AnthropicMessage {
  id: string;
  model: string;
  content: Json[];
  stop_reason: string;
  usage: Json & { output_tokens: number };
}

/** The events of one streamed answer, each `[event name, data]`. */
export function anthropicEvents(message: AnthropicMessage): [string, Json][] {
  const { content, stop_reason, usage, ...rest } = message;
  const events: [string, Json][] = [
    [
      'message_start',
      {
        type: 'message_start',
        message: {
          ...rest,
          type: 'message',
          role: 'assistant',
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { ...usage, output_tokens: 0 },
        },
      },
    ],
  ];
  content.forEach((block, index) => {
    if (block.type === 'tool_use') {
      events.push([
        'content_block_start',
        { type: 'content_block_start', index, content_block: { ...block, input: {} } },
      ]);
      events.push([
        'content_block_delta',
        {
          type: 'content_block_delta',
          index,
          delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) },
        },
      ]);
    } else {
      events.push([
        'content_block_start',
        { type: 'content_block_start', index, content_block: { ...block, text: '' } },
      ]);
      events.push([
        'content_block_delta',
        { type: 'content_block_delta', index, delta: { type: 'text_delta', text: block.text } },
      ]);
    }
    events.push(['content_block_stop', { type: 'content_block_stop', index }]);
  });
  events.push([
    'message_delta',
    {
      type: 'message_delta',
      delta: { stop_reason, stop_sequence: null },
      usage: { output_tokens: usage.output_tokens },
    },
  ]);
  events.push(['message_stop', { type: 'message_stop' }]);
  return events;
}

/** Answers with the message's events (`text/event-stream`). */
export function sendAnthropicStream(res: ServerResponse, message: AnthropicMessage): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const [event, data] of anthropicEvents(message)) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  res.end();
}
