/**
 * `ctxflowCanUseTool` with @anthropic-ai/claude-agent-sdk's `query` and its CLI against the provider
 * stand-in (test/support/provider-stand-in.ts, Anthropic's Messages API streamed): the CLI asks the
 * bridge about every `Read` (an ask rule), ctxflow's gate answers. A switch-off row mid-run: the
 * next `Read` is denied with ctxflow's refusal text, the tool list sent is unchanged, and ctxflow
 * records the refusal in the session's log as it does for every adapter.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { query } from '@anthropic-ai/claude-agent-sdk';
import { CtxflowClient, type NeutralStepAnswer } from '@ctxflow/client';
import { ctxflowCanUseTool, ctxflowTurns } from '@ctxflow/client/claude-agent';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ProviderStandIn, startProviderStandIn } from '../../../test/support/provider-stand-in.ts';
import { cliEnv } from './claude-cli.ts';

let embedded: EmbeddedApp;
let client: CtxflowClient;
let standIn: ProviderStandIn;
let home: string;
beforeAll(async () => {
  embedded = await buildEmbeddedApp({ config: { apiKeys: new Map(), secrets: {} } });
  client = new CtxflowClient({ baseURL: await embedded.app.listen({ port: 0, host: '127.0.0.1' }) });
  standIn = await startProviderStandIn();
  home = mkdtempSync(join(tmpdir(), 'ctxflow-claude-gate-'));
});
afterAll(async () => {
  await standIn.close();
  await embedded.close();
  rmSync(home, { recursive: true, force: true });
});

type Block = { type: string; text?: string; tool_use_id?: string; content?: unknown; is_error?: boolean };
type Body = { messages: { role: string; content: string | Block[] }[]; tools: { name: string }[] };

/** The tool results of a request's last message. */
function results(body: Body): Block[] {
  const last = body.messages.at(-1)!;
  return typeof last.content === 'string' ? [] : last.content.filter((b) => b.type === 'tool_result');
}

describe('ctxflowCanUseTool with @anthropic-ai/claude-agent-sdk 0.3.335 (its CLI, Messages stand-in)', () => {
  it('a Read allowed, a switch-off row, the next Read denied with ctxflow text and recorded by ctxflow', async () => {
    const { agentId } = await client.agents.create({
      context: 'You are the order desk.',
      tools: [{ name: 'Read', parameters: { type: 'object' } }],
    });
    const { sessionId } = await client.sessions.create({ agentId });
    await client.messages.create(sessionId, { role: 'user', content: 'Read a.txt, then b.txt.' });
    const [a, b] = [join(home, 'a.txt'), join(home, 'b.txt')];
    writeFileSync(a, 'order 7: shipped Monday');
    writeFileSync(b, 'order 8: refunded');
    standIn.script(
      { toolCalls: [{ name: 'Read', arguments: { file_path: a } }] },
      { toolCalls: [{ name: 'Read', arguments: { file_path: b } }] },
      { text: 'b.txt is off limits now.' },
    );
    const from = standIn.requests.length;

    /** Told of each step: the one that commits the switch-off row, the one that records the refusal. */
    let committed: (step: NeutralStepAnswer) => void = () => {};
    let refused: () => void = () => {};
    const recorded = new Promise<void>((resolve) => {
      refused = resolve;
    });
    const controller = new AbortController();
    const turns = ctxflowTurns({
      client,
      sessionId,
      idleStepMs: 50,
      signal: controller.signal,
      onStep: (step) => {
        committed(step);
        if (step.request.messages.some((m) => m.role === 'tool' && m.callId === 'toolu_2')) refused();
      },
    });
    const gate = ctxflowCanUseTool({ client, sessionId });
    const asked: { name: string; behavior: string; message?: string }[] = [];
    const run = query({
      prompt: turns,
      options: {
        cwd: home,
        model: 'claude-sonnet-4-5',
        settingSources: [],
        permissionMode: 'default',
        settings: { permissions: { ask: ['Read'] } },
        canUseTool: async (name, input, opts) => {
          const answer = await gate(name, input, opts);
          asked.push({ name, behavior: answer.behavior, ...('message' in answer ? { message: answer.message } : {}) });
          if (asked.length === 1) {
            // Mid-run: the app switches Read off; a step of the turns commits the row before the next call.
            const rowCommitted = new Promise<void>((resolve) => {
              committed = (step) => {
                if (step.rows.length > 0) resolve();
              };
            });
            await client.context.add({ sessionId, items: [{ kind: 'tools', disable: ['Read'] }] });
            await rowCommitted;
          }
          return answer;
        },
        env: cliEnv(home, standIn.origin),
      },
    });
    const outcomes: string[] = [];
    for await (const message of run) {
      if (message.type !== 'result') continue;
      outcomes.push(message.subtype === 'success' ? message.result : message.subtype);
      // The refused call's assistant turn wakes the turns (a stream event): their step records its result.
      await recorded;
      controller.abort();
    }
    const refusal = 'Not executed (tool_inactive): the tool Read is switched off.';
    expect(outcomes).toEqual(['b.txt is off limits now.']);
    expect(asked).toEqual([
      { name: 'Read', behavior: 'allow' },
      { name: 'Read', behavior: 'deny', message: refusal },
    ]);

    const sent = standIn.requests.slice(from);
    expect(sent.map((r) => [r.api, r.status])).toEqual([
      ['anthropic', 200],
      ['anthropic', 200],
      ['anthropic', 200],
    ]);
    const [first, second, third] = sent.map((r) => r.body as Body);
    // The CLI's tool list is the same at every call: the switch-off changes no request's tools.
    expect(first!.tools.map((t) => t.name)).toContain('Read');
    expect(second!.tools.map((t) => t.name)).toEqual(first!.tools.map((t) => t.name));
    expect(third!.tools.map((t) => t.name)).toEqual(first!.tools.map((t) => t.name));
    // The allowed Read ran; the refused one answers its call with ctxflow's text, as an error.
    expect(results(second!)).toHaveLength(1);
    expect(String(results(second!)[0]!.content)).toContain('order 7: shipped Monday');
    const [denied] = results(third!);
    expect(denied).toMatchObject({ tool_use_id: 'toolu_2', is_error: true });
    expect(String(denied!.content).split('\n')[0]).toBe(refusal);
    expect(JSON.stringify(third)).not.toContain('order 8: refunded');

    // ctxflow's log holds the refused call and the result ctxflow recorded for it, as for every adapter.
    const log = await client.messages.list(sessionId);
    expect(
      log.map(({ role, content, toolCalls, callId, outcome }) => ({ role, content, toolCalls, callId, outcome })),
    ).toEqual([
      { role: 'user', content: 'Read a.txt, then b.txt.' },
      {
        role: 'assistant',
        content: '',
        toolCalls: [{ callId: 'toolu_2', name: 'Read', arguments: JSON.stringify({ file_path: b }) }],
      },
      { role: 'tool', content: refusal, callId: 'toolu_2', outcome: 'tool_inactive' },
    ]);
  }, 120_000);
});
