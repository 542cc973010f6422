import { createMemoryBus } from '@ctxflow/bus';
import { TOPICS } from '@ctxflow/contracts';
import { createEngine, MemorySessionStore, startStepRequestConsumer } from '@ctxflow/session-runner';
import { describe, expect, it } from 'vitest';

async function until(check: () => boolean, ms = 5000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('step requests while a call waits for its result', () => {
  it('R11: a step request while a call of the last assistant message has no result is answered with state_calls_pending, not redelivered; the next request after the result runs and answers the neutral request, also when redelivered; format neutral is taken', async () => {
    const bus = createMemoryBus();
    const store = new MemorySessionStore();
    const engine = createEngine({ store });
    const agent = await engine.createAgent('default', { tools: [{ name: 'search' }] });
    const { sessionId } = await engine.createSession('default', { agentId: agent.agentId });
    await engine.appendMessages('default', sessionId, [
      { role: 'assistant', content: '', toolCalls: [{ callId: 'c1', name: 'search', arguments: '{}' }] },
    ]);
    const results: any[] = [];
    await bus.subscriber.subscribe({
      topic: TOPICS.stepResults,
      groupId: `results-${Math.random()}`,
      async handle(records) {
        for (const r of records) results.push(JSON.parse(r.value));
      },
    });
    const sub = await startStepRequestConsumer({ engine, store, subscriber: bus.subscriber, publisher: bus.publisher });
    const send = (requestId: string) =>
      bus.publisher.publish(TOPICS.stepRequests, [
        { key: sessionId, value: JSON.stringify({ sessionId, requestId, mode: 'first' }) },
      ]);
    await send('r1');
    await until(() => results.length === 1);
    expect(results[0]).toEqual({
      requestId: 'r1',
      sessionId,
      ok: false,
      error: {
        code: 'state_calls_pending',
        message:
          "step: 1 call of the last assistant message has no result yet (details.pending); record their results (POST /sessions/:sessionId/messages), or wait for the client's answer, its deadline or the approval, then send it again",
        retryable: false,
      },
    });
    await engine.appendMessages('default', sessionId, [{ role: 'tool', callId: 'c1', content: 'found' }]);
    await send('r2');
    await until(() => results.length === 2);
    expect(results[1]).toMatchObject({ requestId: 'r2', ok: true });
    // The neutral request by default: v1's { role, content } with toolCalls, callId and name added.
    expect(results[1].request.messages).toEqual([
      { role: 'assistant', content: '', toolCalls: [{ callId: 'c1', name: 'search', arguments: '{}' }] },
      { role: 'tool', content: 'found', callId: 'c1', name: 'search' },
    ]);
    expect(results[1].cache).toMatchObject({ rebuilt: true, reason: 'new_thread', prefixEnd: -1, previousEnd: 0 });
    // A redelivered request answers the same step, the same neutral answer.
    await send('r2');
    await until(() => results.length === 3);
    expect(results[2]).toEqual({ ...results[1], skipped: [] });
    // A step request may ask for the neutral format of Contract v2.
    await bus.publisher.publish(TOPICS.stepRequests, [
      { key: sessionId, value: JSON.stringify({ sessionId, requestId: 'r3', format: 'neutral' }) },
    ]);
    await until(() => results.length === 4);
    expect(results[3].request.messages).toEqual([
      { role: 'assistant', content: '', toolCalls: [{ callId: 'c1', name: 'search', arguments: '{}' }] },
      { role: 'tool', content: 'found', callId: 'c1', name: 'search' },
    ]);
    expect(results[3].cache).toMatchObject({ rebuilt: false, reason: null, prefixEnd: -1, previousEnd: 2 });
    await sub.close();
  });
});
