import { allowedTools, CtxflowClient, conversation, refusalText } from '@ctxflow/client';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

let embedded: EmbeddedApp;
let client: CtxflowClient;
beforeAll(async () => {
  embedded = await buildEmbeddedApp({ config: { apiKeys: new Map(), secrets: {} } });
  client = new CtxflowClient({ baseURL: await embedded.app.listen({ port: 0, host: '127.0.0.1' }) });
});
afterAll(async () => embedded.close());

const row = { id: 'r1', kind: 'notice', source: 'app' } as const;

describe('reading a request (the pieces every adapter shares)', () => {
  it('conversation: the prefix apart, rows in place, each result paired with its call, a result without one as a user turn', () => {
    const { system, messages } = conversation({
      system: 'You are a support agent.',
      messages: [
        { role: 'system', content: 'You are a support agent.' },
        { role: 'user', content: 'Where is order 7?' },
        { role: 'assistant', content: '', toolCalls: [{ callId: 'c1', name: 'lookup', arguments: '{}' }] },
        { role: 'tool', content: 'shipped', callId: 'c1', name: 'lookup' },
        { role: 'system', content: '<context kind="notice" source="app">\nnews\n</context>', row },
        { role: 'tool', content: 'late', callId: 'c0', name: 'lookup' },
        { role: 'assistant', content: 'Shipped.' },
      ],
    });
    expect(system).toBe('You are a support agent.');
    expect(messages).toEqual([
      { role: 'user', content: 'Where is order 7?' },
      { role: 'assistant', content: '', toolCalls: [{ callId: 'c1', name: 'lookup', arguments: '{}' }] },
      { role: 'tool', content: 'shipped', callId: 'c1', name: 'lookup' },
      { role: 'system', content: '<context kind="notice" source="app">\nnews\n</context>', row },
      { role: 'user', content: '<tool_result callId="c0" name="lookup">\nlate\n</tool_result>' },
      { role: 'assistant', content: 'Shipped.', toolCalls: [] },
    ]);
    // Without a prefix, a first system message is a row and stays.
    expect(conversation({ system: '', messages: [{ role: 'system', content: 'x', row }] }).messages).toEqual([
      { role: 'system', content: 'x', row },
    ]);
  });

  it('allowedTools: the active set (or the forced completion tool) limited to the tools offered', () => {
    const active = ['lookup', 'refund', '__finish__'];
    expect(allowedTools({ activeTools: active, toolChoice: 'auto' }, ['lookup', '__finish__'])).toEqual({
      names: ['lookup', '__finish__'],
      required: false,
    });
    expect(
      allowedTools({ activeTools: active, toolChoice: { type: 'tool', name: '__finish__' } }, ['lookup', '__finish__']),
    ).toEqual({ names: ['__finish__'], required: true });
  });

  it('refusalText is word for word the result ctxflow records for each refused call', async () => {
    const { agentId } = await client.agents.create({
      tools: [{ name: 'refund', needsApproval: true }, { name: 'lookup' }],
    });
    const { sessionId } = await client.sessions.create({ agentId });
    await client.messages.create(sessionId, { role: 'user', content: 'Refund order 7.' });
    await client.context.add({ sessionId, items: [{ kind: 'tools', disable: ['lookup'] }] });
    await client.step(sessionId);
    const calls = [
      { callId: 'c-off', name: 'lookup', arguments: '{}' },
      { callId: 'c-none', name: 'cancel', arguments: '{}' },
      { callId: 'c-denied', name: 'refund', arguments: '{}' },
    ];
    await client.messages.create(sessionId, { role: 'assistant', content: '', toolCalls: calls });
    const reasons = [];
    for (const call of calls)
      reasons.push((await client.toolCalls.gate(sessionId, { callId: call.callId, name: call.name })).reason);
    expect(reasons).toEqual(['tool_inactive', 'tool_unavailable', 'approval_required']);
    await client.approvals.answer(sessionId, 'c-denied', false);
    await client.step(sessionId);
    const results = (await client.messages.list(sessionId)).filter((m) => m.role === 'tool');
    expect(results.map((m) => [m.outcome, m.content])).toEqual([
      ['tool_inactive', refusalText('lookup', 'tool_inactive')],
      ['tool_unavailable', refusalText('cancel', 'tool_unavailable')],
      ['approval_denied', refusalText('refund', 'approval_denied')],
    ]);
  });
});
