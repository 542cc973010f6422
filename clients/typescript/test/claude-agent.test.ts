/**
 * `@ctxflow/client/claude-agent` with @anthropic-ai/claude-agent-sdk's own `query` and its CLI,
 * pointed at the provider stand-in (test/support/provider-stand-in.ts, Anthropic's Messages API
 * streamed), which refuses a request that breaks the API's documented rules. The CLI runs with a
 * scratch HOME and a dummy key, and calls nothing but the stand-in. One session: the user's question
 * as the first turn, the CLI's own tool call and its result, a signed ticket update reaching the
 * next turn, each row handed over once, and the cursor acknowledged only for a turn the SDK took;
 * and, with the client alone, a ctxflow rewind below the cursor, and an idle wait on the session's
 * stream that runs no step until a message comes.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { query } from '@anthropic-ai/claude-agent-sdk';
import { CtxflowClient } from '@ctxflow/client';
import { ctxflowTurns } from '@ctxflow/client/claude-agent';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ProviderStandIn, startProviderStandIn } from '../../../test/support/provider-stand-in.ts';
import { deliverSigned, untilApplied } from '../../../test/support/signed-update.ts';
import { cliEnv } from './claude-cli.ts';

const FEED_SECRET = 'claude-agent-feed-secret';
const NEWS = 'Customer replied: the parcel arrived damaged';

let embedded: EmbeddedApp;
let client: CtxflowClient;
let standIn: ProviderStandIn;
let home: string;
beforeAll(async () => {
  embedded = await buildEmbeddedApp({
    config: { apiKeys: new Map(), secrets: { generic: [{ tenant: 'default', secret: FEED_SECRET }] } },
  });
  client = new CtxflowClient({ baseURL: await embedded.app.listen({ port: 0, host: '127.0.0.1' }) });
  standIn = await startProviderStandIn();
  home = mkdtempSync(join(tmpdir(), 'ctxflow-claude-agent-'));
});
afterAll(async () => {
  await standIn.close();
  await embedded.close();
  rmSync(home, { recursive: true, force: true });
});

type Block = { type: string; text?: string; tool_use_id?: string; content?: unknown };
type Body = { messages: { role: string; content: string | Block[] }[]; tools: { name: string }[]; stream: boolean };

/** The text of a message's blocks, joined. */
function text(message: Body['messages'][number]): string {
  return typeof message.content === 'string' ? message.content : JSON.stringify(message.content);
}

describe('@ctxflow/client/claude-agent with @anthropic-ai/claude-agent-sdk 0.3.335 (its CLI, Messages stand-in)', () => {
  it('the question, a tool call and its result, a ticket update at the next turn; rows handed over once', async () => {
    const { agentId } = await client.agents.create({ context: 'You are the order desk.' });
    const { sessionId } = await client.sessions.create({ agentId });
    await client.subscriptions.create(sessionId, { source: 'generic', ticket: 'T-7' });
    await client.messages.create(sessionId, { role: 'user', content: 'What does order.txt say about order 7?' });
    const file = join(home, 'order.txt');
    writeFileSync(file, 'order 7: shipped Monday');
    standIn.script(
      { toolCalls: [{ name: 'Read', arguments: { file_path: file } }] },
      { text: 'Order 7 shipped on Monday.' },
      { text: 'The parcel arrived damaged.' },
    );
    const from = standIn.requests.length;

    const controller = new AbortController();
    const acknowledged: number[] = [];
    const turns = ctxflowTurns({
      client,
      sessionId,
      idleStepMs: 20,
      signal: controller.signal,
      onAcknowledge: (since) => {
        acknowledged.push(since);
      },
    });
    const run = query({
      prompt: turns,
      options: {
        cwd: home,
        model: 'claude-sonnet-4-5',
        settingSources: [],
        env: cliEnv(home, standIn.origin),
      },
    });
    const results: string[] = [];
    for await (const message of run) {
      if (message.type !== 'result') continue;
      results.push(message.subtype === 'success' ? message.result : message.subtype);
      if (results.length === 1) {
        // The first turn is answered: a signed ticket update becomes a row at a later step.
        expect(
          await deliverSigned(embedded, FEED_SECRET, {
            eventId: `claude-${sessionId}`,
            ticket: 'T-7',
            summary: NEWS,
            version: 1,
          }),
        ).toBe(202);
        await untilApplied(embedded);
      } else controller.abort();
    }
    expect(results).toEqual(['Order 7 shipped on Monday.', 'The parcel arrived damaged.']);

    const sent = standIn.requests.slice(from);
    expect(sent.map((r) => [r.api, r.status])).toEqual([
      ['anthropic', 200],
      ['anthropic', 200],
      ['anthropic', 200],
    ]);
    const [first, second, third] = sent.map((r) => r.body as Body);
    expect([first!.stream, second!.stream, third!.stream]).toEqual([true, true, true]);
    // The question as the first user turn; the CLI's tool list unchanged at every call.
    expect(text(first!.messages.at(-1)!)).toContain('What does order.txt say about order 7?');
    expect(second!.tools.map((t) => t.name)).toEqual(first!.tools.map((t) => t.name));
    expect(third!.tools.map((t) => t.name)).toEqual(first!.tools.map((t) => t.name));
    // The CLI ran its Read tool: its result answers the call in the next request.
    const result = (second!.messages.at(-1)!.content as Block[]).find((b) => b.type === 'tool_result');
    expect(result).toMatchObject({ tool_use_id: expect.stringMatching(/^toolu_/) });
    expect(JSON.stringify(result!.content)).toContain('order 7: shipped Monday');
    // The ticket update reaches the next turn as a hook notice, and only that turn.
    expect(text(third!.messages.at(-1)!)).toContain(NEWS);
    expect(JSON.stringify([first, second])).not.toContain(NEWS);
    expect(JSON.stringify(third!.messages.slice(0, -1))).not.toContain(NEWS);
    // The system prefix and the question (2 messages), then the notice (3).
    expect(acknowledged).toEqual([2, 3]);

    // Started again from the acknowledged cursor: only what is new since, nothing handed over before.
    await client.context.add({ sessionId, items: [{ kind: 'instruction', content: 'Answer in French.' }] });
    const again = ctxflowTurns({ client, sessionId, since: 3, idleStepMs: 20 });
    const next = await again.next();
    expect(next.done).toBe(false);
    const content = next.value!.message.content as Block[];
    expect(content).toHaveLength(1);
    expect(content[0]!.text).toContain('Answer in French.');
    // A turn not taken (the SDK never asked for the next one) is not acknowledged: it comes back.
    await again.return();
    const acks: number[] = [];
    const third3 = ctxflowTurns({
      client,
      sessionId,
      since: 3,
      idleStepMs: 20,
      onAcknowledge: (s) => void acks.push(s),
    });
    expect((await third3.next()).value).toEqual(next.value);
    expect(acks).toEqual([]);
    await third3.return();
  }, 120_000);

  it('a rewind below the cursor: the rows after what survived (the requeued one again), nothing that survived', async () => {
    const { sessionId } = await client.sessions.create({ context: 'You are the order desk.' });
    await client.messages.create(sessionId, { role: 'user', content: 'Where is order 7?' });
    const stepIds: string[] = [];
    const acknowledged: number[] = [];
    /** One turn from the cursor, taken (the iterable is asked for the next one, which acknowledges it and ends it). */
    const take = async (since: number) => {
      const controller = new AbortController();
      const turns = ctxflowTurns({
        client,
        sessionId,
        since,
        idleStepMs: 20,
        signal: controller.signal,
        onStep: (s) => stepIds.push(s.stepId),
        onAcknowledge: (s) => {
          acknowledged.push(s);
          controller.abort();
        },
      });
      const turn = (await turns.next()).value!;
      expect((await turns.next()).done).toBe(true);
      return (turn.message.content as Block[]).map((b) => b.text);
    };
    expect(await take(0)).toEqual(['Where is order 7?']);
    const rewindTo = stepIds.at(-1)!;
    await client.context.add({ sessionId, items: [{ kind: 'instruction', content: 'Be brief.' }] });
    expect(await take(2)).toEqual([expect.stringContaining('Be brief.')]);
    // The rewind cuts the row and queues its item again (README: delivered once at the next step): the
    // whole answer hands over it and the new one, not the question that survived.
    await client.rewind(sessionId, { toStepId: rewindTo });
    await client.context.add({ sessionId, items: [{ kind: 'instruction', content: 'Answer in French.' }] });
    expect(await take(3)).toEqual([expect.stringContaining('Be brief.'), expect.stringContaining('Answer in French.')]);
    // The system prefix and the question, then the row, then both rows after the two that survived.
    expect(acknowledged).toEqual([2, 3, 4]);
  });

  it('idle: no step while nothing comes (steps counted by the API); a user message then reaches the next turn', async () => {
    const { sessionId } = await client.sessions.create({ context: 'You are the order desk.' });
    await client.messages.create(sessionId, { role: 'user', content: 'Where is order 7?' });
    const controller = new AbortController();
    let idle: () => void = () => {};
    const idled = new Promise<void>((resolve) => {
      idle = resolve;
    });
    // No fallback step within the test: only a stream event can start the next step.
    const turns = ctxflowTurns({
      client,
      sessionId,
      idleStepMs: 600_000,
      signal: controller.signal,
      onIdle: () => idle(),
    });
    const first = (await turns.next()).value!;
    expect((first.message.content as Block[]).map((b) => b.text)).toEqual(['Where is order 7?']);
    // Asked for the next turn: the first is acknowledged, a step finds nothing new, the turns wait.
    const next = turns.next();
    await idled;
    const before = (await client.sessions.get(sessionId)).steps;
    expect(before).toBe(2);
    await sleep(3_000);
    expect((await client.sessions.get(sessionId)).steps).toBe(before);
    // A message during the wait is a stream event: one step, and it is the next turn.
    await client.messages.create(sessionId, { role: 'user', content: 'And order 8?' });
    const second = (await next).value!;
    expect((second.message.content as Block[]).map((b) => b.text)).toEqual(['And order 8?']);
    expect((await client.sessions.get(sessionId)).steps).toBe(before + 1);
    controller.abort();
    expect((await turns.next()).done).toBe(true);
  });
});
