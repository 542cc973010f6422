import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

/** One scripted model answer: text, or tool calls (arguments as an object). */
export interface Turn {
  text?: string;
  calls?: { name: string; arguments: Record<string, unknown> }[];
}

/**
 * A local stand-in for OpenAI's Responses API (`POST /v1/responses`, not streamed): answers the
 * scripted turns in order and keeps every request body. Not a model: for examples and tests.
 */
export async function startStandIn(script: Turn[]) {
  const requests: Record<string, unknown>[] = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => {
      raw += chunk;
    });
    req.on('end', () => {
      const body = JSON.parse(raw || '{}');
      requests.push(body);
      const turn = script[requests.length - 1] ?? { text: 'Done.' };
      const output = [
        ...(turn.text === undefined
          ? []
          : [
              {
                type: 'message',
                id: `msg_${randomUUID()}`,
                status: 'completed',
                role: 'assistant',
                content: [{ type: 'output_text', text: turn.text, annotations: [] }],
              },
            ]),
        ...(turn.calls ?? []).map((c) => ({
          type: 'function_call',
          id: `fc_${randomUUID()}`,
          call_id: `call_${randomUUID().slice(0, 8)}`,
          name: c.name,
          arguments: JSON.stringify(c.arguments),
          status: 'completed',
        })),
      ];
      const usage = {
        input_tokens: 1,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 1,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 2,
      };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: `resp_${randomUUID()}`,
          object: 'response',
          created_at: Math.floor(Date.now() / 1000),
          status: 'completed',
          model: body.model,
          output,
          error: null,
          incomplete_details: null,
          usage,
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
