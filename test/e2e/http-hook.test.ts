import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHarness } from '../support/harness.ts';

/** An agent's own stepContext hook over HTTP, scripted per request. */
let server: Server;
let url = '';
const received: { sessionId: string; cursor: unknown; maxBytes: number }[] = [];
let answer: (res: ServerResponse) => void = (res) => res.writeHead(204).end();

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (chunk) => {
      body += chunk;
    });
    req.on('end', () => {
      received.push(JSON.parse(body));
      answer(res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const json = (status: number, value: unknown) => (res: ServerResponse) =>
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));

describe('an agent-configured HTTP stepContext hook', () => {
  it('is POSTed { sessionId, cursor } before each model call; its batches become hook rows; failures are skips', async () => {
    const h = await createHarness();
    const agent = await h.call('POST', '/agents', { stepContext: { url, timeoutMs: 200, maxBytes: 4096 } });
    const sessionId = (await h.call('POST', '/sessions', { agentId: agent.body.agentId })).body.sessionId;
    const step = async () => (await h.call('POST', `/sessions/${sessionId}/steps`, {})).body;

    answer = json(200, { items: [{ kind: 'notice', content: 'ticket T-1 reopened' }], cursor: 'c1' });
    const first = await step();
    expect(received.at(-1)).toEqual({ sessionId, cursor: null, maxBytes: 4096 });
    expect(first.rows.map((r: any) => [r.kind, r.source, r.content, r.cursor])).toEqual([
      ['notice', 'hook', 'ticket T-1 reopened', 'c1'],
    ]);

    answer = (res) => res.writeHead(204).end();
    expect((await step()).rows).toEqual([]);
    expect(received.at(-1)?.cursor).toBe('c1');

    answer = json(500, { oops: true });
    const failed = await step();
    expect(failed.rows).toEqual([]);
    expect(failed.skipped).toEqual([{ reason: 'hook_error', message: 'stepContext hook answered HTTP 500' }]);

    answer = (res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"items": [');
    expect((await step()).skipped.map((s: any) => s.reason)).toEqual(['hook_invalid']);

    answer = (res) =>
      setTimeout(() => json(200, { items: [{ kind: 'notice', content: 'too late' }], cursor: 'c9' })(res), 600);
    const slow = await step();
    expect(slow.skipped.map((s: any) => s.reason)).toEqual(['hook_timeout']);
    expect(slow.rows).toEqual([]);

    // Every skip left the cursor where it was: the next call still gets c1.
    answer = (res) => res.writeHead(204).end();
    expect((await step()).cursor).toBe('c1');
    expect(received.at(-1)?.cursor).toBe('c1');
    expect(h.telemetry.skipped.map((s) => s.reason)).toEqual(['hook_error', 'hook_invalid', 'hook_timeout']);
  });
});
