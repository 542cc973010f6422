import { CtxflowClient, refusalText } from '@ctxflow/client';
import { ctxflowMiddleware, toolDeclarations } from '@ctxflow/client/langchain';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { MemorySaver } from '@langchain/langgraph';
import { ChatOpenAI } from '@langchain/openai';
import { createAgent, tool } from 'langchain';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type ProviderStandIn, startProviderStandIn } from '../../../test/support/provider-stand-in.ts';
import { deliverSigned, untilApplied } from '../../../test/support/signed-update.ts';

const FEED_SECRET = 'langchain-feed-secret';
const NEWS = 'Customer replied: the parcel arrived damaged';

let embedded: EmbeddedApp;
let client: CtxflowClient;
let standIn: ProviderStandIn;
beforeAll(async () => {
  embedded = await buildEmbeddedApp({
    config: {
      apiKeys: new Map([['lc-key', 'tenant-lc']]),
      secrets: { generic: [{ tenant: 'tenant-lc', secret: FEED_SECRET }] },
    },
  });
  const baseURL = await embedded.app.listen({ port: 0, host: '127.0.0.1' });
  client = new CtxflowClient({ baseURL, apiKey: 'lc-key' });
  standIn = await startProviderStandIn();
});
afterAll(async () => {
  await standIn.close();
  await embedded.close();
});

/** A signed generic-feed delivery, applied by step-context before it returns. */
async function deliver(update: object): Promise<void> {
  expect(await deliverSigned(embedded, FEED_SECRET, update)).toBe(202);
  await untilApplied(embedded);
}

/** The parts of a request the stand-in received that the test reads (Chat Completions or Responses). */
const Sent = z.object({
  model: z.string(),
  messages: z.array(z.object({ role: z.string() }).loose()).optional(),
  input: z.array(z.object({ role: z.string().optional(), type: z.string().optional() }).loose()).optional(),
  tools: z.array(z.record(z.string(), z.unknown())),
  tool_choice: z.unknown(),
  prompt_cache_key: z.string(),
});
const sent = (i: number) => Sent.parse(standIn.requests[i]!.body);
const turns = (i: number) => sent(i).messages ?? sent(i).input ?? [];
const toolNames = (i: number) =>
  sent(i).tools.map(
    (t) => z.object({ function: z.object({ name: z.string() }) }).safeParse(t).data?.function.name ?? t.name,
  );
const allowedNames = (i: number) => JSON.stringify(sent(i).tool_choice).match(/"name":"[^"]+"/g);

describe.each([
  ['openai-chat', false],
  ['openai-responses', true],
] as const)(
  '@ctxflow/client/langchain with langchain 1.5 and @langchain/openai 1.6 (%s stand-in)',
  (api, useResponsesApi) => {
    it('a tool call and its result, a switch-off mid-run, a signed ticket update at the next call, forced completion, a rewind', async () => {
      const ticket = `T-${api}`;
      const from = standIn.requests.length;
      let refunded = 0;
      let sessionId = '';
      const lookup = tool(
        async ({ id }) => {
          // Mid-run: the app switches refunds off and the ticket system sends an update.
          await client.context.add({ sessionId, items: [{ kind: 'tools', disable: ['refund'] }] });
          await deliver({ eventId: `lc-${api}`, ticket, summary: NEWS, version: 1 });
          return `order ${id}: shipped Monday`;
        },
        { name: 'lookup_order', description: 'Find an order', schema: z.object({ id: z.string() }) },
      );
      const refund = tool(
        async () => {
          refunded += 1;
          return 'refunded';
        },
        { name: 'refund', description: 'Refund an order', schema: z.object({ id: z.string() }) },
      );
      const { agentId } = await client.agents.create({
        context: 'You are a support agent.',
        tools: toolDeclarations([lookup, refund]),
      });
      ({ sessionId } = await client.sessions.create({ agentId }));
      await client.subscriptions.create(sessionId, { source: 'generic', ticket });

      const steps: string[] = [];
      const agent = createAgent({
        model: new ChatOpenAI({
          model: 'gpt-5-mini',
          apiKey: 'stand-in',
          configuration: { baseURL: `${standIn.origin}/v1` },
          useResponsesApi,
          maxRetries: 0,
        }),
        tools: [lookup, refund],
        systemPrompt: 'replaced by ctxflow',
        middleware: [ctxflowMiddleware({ client, sessionId, maxModelCalls: 3, onStep: (s) => steps.push(s.stepId) })],
      });
      standIn.script(
        { toolCalls: [{ name: 'lookup_order', arguments: { id: '7' } }] },
        { toolCalls: [{ name: 'refund', arguments: { id: '7' } }] },
        { toolCalls: [{ name: '__finish__', arguments: { result: 'Shipped Monday.' } }] },
      );
      const question = 'Where is order 7?';
      await client.messages.create(sessionId, { role: 'user', content: question });
      const first = await agent.invoke({ messages: [{ role: 'user', content: question }] });

      // Every request met the API's rules; the tool list never changed; the active set and the
      // forced completion went as allowed_tools; the session's cache key as prompt_cache_key.
      expect(standIn.requests.slice(from).map((r) => [r.api, r.status, r.error])).toEqual([
        [api, 200, undefined],
        [api, 200, undefined],
        [api, 200, undefined],
      ]);
      const [a, b, c] = [from, from + 1, from + 2];
      expect(toolNames(a)).toEqual(['lookup_order', 'refund', '__finish__']);
      expect(sent(b).tools).toEqual(sent(a).tools);
      expect(sent(c).tools).toEqual(sent(a).tools);
      expect(allowedNames(a)).toEqual(['"name":"lookup_order"', '"name":"refund"', '"name":"__finish__"']);
      expect(allowedNames(b)).toEqual(['"name":"lookup_order"', '"name":"__finish__"']);
      expect(allowedNames(c)).toEqual(['"name":"__finish__"']);
      expect(JSON.stringify(sent(c).tool_choice)).toContain('"required"');
      expect(new Set([a, b, c].map((i) => sent(i).prompt_cache_key)).size).toBe(1);

      // Each request starts with the one before (the prompt cache prefix). The system prefix goes as
      // `developer` (ChatOpenAI's role for gpt-5), then the call, its result and the two rows of step 2.
      expect(turns(b).slice(0, turns(a).length)).toEqual(turns(a));
      expect(turns(c).slice(0, turns(b).length)).toEqual(turns(b));
      expect(JSON.stringify(turns(a)[0])).toContain('You are a support agent.');
      expect(turns(a)[0]!.role).toBe('developer');
      const added = JSON.stringify(turns(b).slice(turns(a).length));
      expect(added).toContain('order 7: shipped Monday');
      expect(added).toContain(NEWS);
      expect(added).toContain('refund');

      // The refused call never ran; LangChain holds ctxflow's refusal text as its result, and ctxflow
      // recorded that same text as the call's one result.
      expect(refunded).toBe(0);
      const refusal = refusalText('refund', 'tool_inactive');
      expect(first.messages.map((m) => [m.type, m.text])).toEqual([
        ['human', question],
        ['ai', ''],
        ['tool', 'order 7: shipped Monday'],
        ['ai', ''],
        ['tool', refusal],
        ['ai', ''],
        ['tool', 'Finished.'],
      ]);
      const log = await client.messages.list(sessionId);
      expect(log.map((m) => [m.role, m.content, m.outcome])).toEqual([
        ['user', question, undefined],
        ['assistant', '', undefined],
        ['tool', 'order 7: shipped Monday', undefined],
        ['assistant', '', undefined],
        ['tool', refusal, 'tool_inactive'],
        ['assistant', '', undefined],
      ]);

      // A rewind to the second step, then a run given the whole LangChain history again (no
      // checkpointer): nothing is recorded twice, and the request extends the second step's request.
      await client.rewind(sessionId, { toStepId: steps[1]! });
      standIn.script({ text: 'Order 7 shipped on Monday.' });
      const again = 'And when does it arrive?';
      await client.messages.create(sessionId, { role: 'user', content: again });
      const second = await agent.invoke({ messages: [...first.messages, { role: 'user', content: again }] });
      expect(second.messages.at(-1)!.text).toBe('Order 7 shipped on Monday.');
      const d = from + 3;
      expect(standIn.requests[d]!.status).toBe(200);
      expect(turns(d).slice(0, turns(b).length)).toEqual(turns(b));
      expect(JSON.stringify(turns(d).slice(turns(b).length))).toContain(again);
      expect(allowedNames(d)).toEqual(['"name":"lookup_order"', '"name":"__finish__"']);
      expect((await client.messages.list(sessionId)).map((m) => [m.role, m.content])).toEqual([
        ['user', question],
        ['assistant', ''],
        ['tool', 'order 7: shipped Monday'],
        ['user', again],
        ['assistant', 'Order 7 shipped on Monday.'],
      ]);
    });
  },
);

describe('@ctxflow/client/langchain with a LangGraph checkpointer', () => {
  it('two runs on one thread: the checkpointed history is not recorded again, each request extends the last', async () => {
    const from = standIn.requests.length;
    const { agentId } = await client.agents.create({ context: 'You are a support agent.' });
    const { sessionId } = await client.sessions.create({ agentId });
    const agent = createAgent({
      model: new ChatOpenAI({
        model: 'gpt-5-mini',
        apiKey: 'stand-in',
        configuration: { baseURL: `${standIn.origin}/v1` },
        maxRetries: 0,
      }),
      tools: [],
      checkpointer: new MemorySaver(),
      middleware: [ctxflowMiddleware({ client, sessionId })],
    });
    const config = { configurable: { thread_id: sessionId } };
    standIn.script({ text: 'Hello.' }, { text: 'It shipped Monday.' });
    for (const content of ['Hi', 'Where is order 7?']) {
      await client.messages.create(sessionId, { role: 'user', content });
      await agent.invoke({ messages: [{ role: 'user', content }] }, config);
    }
    expect(standIn.requests.slice(from).map((r) => r.status)).toEqual([200, 200]);
    expect(turns(from + 1).slice(0, turns(from).length)).toEqual(turns(from));
    expect((await client.messages.list(sessionId)).map((m) => [m.role, m.content])).toEqual([
      ['user', 'Hi'],
      ['assistant', 'Hello.'],
      ['user', 'Where is order 7?'],
      ['assistant', 'It shipped Monday.'],
    ]);
  });
});

describe('@ctxflow/client/langchain with a tool that needs an approval', () => {
  it('each call is put to a person: the approved one runs, the denied one gets approval_denied, the tool list unchanged', async () => {
    const from = standIn.requests.length;
    const refunded: string[] = [];
    const refund = tool(
      async ({ id }) => {
        refunded.push(id);
        return `order ${id}: refunded`;
      },
      { name: 'refund', description: 'Refund an order', schema: z.object({ id: z.string() }) },
    );
    const { agentId } = await client.agents.create({
      context: 'You are a support agent.',
      tools: toolDeclarations([refund]).map((t) => ({ ...t, needsApproval: true })),
    });
    const { sessionId } = await client.sessions.create({ agentId });
    const asked: [string, Record<string, unknown>][] = [];
    const agent = createAgent({
      model: new ChatOpenAI({
        model: 'gpt-5-mini',
        apiKey: 'stand-in',
        configuration: { baseURL: `${standIn.origin}/v1` },
        maxRetries: 0,
      }),
      tools: [refund],
      middleware: [
        ctxflowMiddleware({
          client,
          sessionId,
          // The person approves the refund of order 7 and denies that of order 8.
          approve: async ({ name, args }) => {
            asked.push([name, args]);
            return args.id === '7';
          },
        }),
      ],
    });
    standIn.script(
      { toolCalls: [{ name: 'refund', arguments: { id: '7' } }] },
      { toolCalls: [{ name: 'refund', arguments: { id: '8' } }] },
      { toolCalls: [{ name: '__finish__', arguments: { result: 'Refunded order 7.' } }] },
    );
    const question = 'Refund orders 7 and 8.';
    await client.messages.create(sessionId, { role: 'user', content: question });
    const run = await agent.invoke({ messages: [{ role: 'user', content: question }] });

    expect(asked).toEqual([
      ['refund', { id: '7' }],
      ['refund', { id: '8' }],
    ]);
    expect(refunded).toEqual(['7']);
    expect(standIn.requests.slice(from).map((r) => [r.status, r.error])).toEqual([
      [200, undefined],
      [200, undefined],
      [200, undefined],
    ]);
    expect(sent(from + 1).tools).toEqual(sent(from).tools);
    expect(sent(from + 2).tools).toEqual(sent(from).tools);
    // The approved call's result reaches the next model call; the denied one holds ctxflow's refusal,
    // in LangChain and as the call's one result in ctxflow's log.
    expect(JSON.stringify(turns(from + 1))).toContain('order 7: refunded');
    const denied = refusalText('refund', 'approval_denied');
    expect(JSON.stringify(turns(from + 2))).toContain(denied);
    expect(run.messages.map((m) => [m.type, m.text])).toEqual([
      ['human', question],
      ['ai', ''],
      ['tool', 'order 7: refunded'],
      ['ai', ''],
      ['tool', denied],
      ['ai', ''],
      ['tool', 'Finished.'],
    ]);
    expect((await client.messages.list(sessionId)).map((m) => [m.role, m.content, m.outcome])).toEqual([
      ['user', question, undefined],
      ['assistant', '', undefined],
      ['tool', 'order 7: refunded', undefined],
      ['assistant', '', undefined],
      ['tool', denied, 'approval_denied'],
      ['assistant', '', undefined],
    ]);
  });
});
