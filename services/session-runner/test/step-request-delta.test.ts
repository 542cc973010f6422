/** Step requests on Kafka take `since` like the HTTP step route: the delta of the neutral request. */
import { createMemoryBus } from '@ctxflow/bus';
import { DLQ_HEADERS, TOPICS } from '@ctxflow/contracts';
import { createEngine, MemorySessionStore, startStepRequestConsumer } from '@ctxflow/session-runner';
import { describe, expect, it } from 'vitest';

async function until(check: () => boolean, ms = 5000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('step requests with since', () => {
  it('R3: since: a step request with since answers the messages from since on and echoes it; past the previous request, the whole request with since 0; a bad since is dead-lettered as invalid', async () => {
    const bus = createMemoryBus();
    const store = new MemorySessionStore();
    const engine = createEngine({ store });
    const agent = await engine.createAgent('default', { context: 'You help.', tools: [{ name: 'search' }] });
    const { sessionId } = await engine.createSession('default', { agentId: agent.agentId });
    await engine.appendMessages('default', sessionId, [{ role: 'user', content: 'Hi' }]);
    const results: any[] = [];
    const letters: any[] = [];
    await bus.subscriber.subscribe({
      topic: TOPICS.stepResults,
      groupId: `read-${Math.random()}`,
      async handle(records) {
        for (const r of records) results.push(JSON.parse(r.value));
      },
    });
    await bus.subscriber.subscribe({
      topic: TOPICS.stepRequestsDlq,
      groupId: `read-${Math.random()}`,
      async handle(records) {
        for (const r of records) letters.push(r.headers);
      },
    });
    const sub = await startStepRequestConsumer({ engine, store, subscriber: bus.subscriber, publisher: bus.publisher });
    const send = (body: Record<string, unknown>) =>
      bus.publisher.publish(TOPICS.stepRequests, [{ key: sessionId, value: JSON.stringify({ sessionId, ...body }) }]);
    await send({ requestId: 'r1', since: 0 });
    await until(() => results.length === 1);
    expect(results[0].request.since).toBe(0);
    expect(results[0].request.messages).toEqual([
      { role: 'system', content: 'You help.' },
      { role: 'user', content: 'Hi' },
    ]);
    await engine.appendMessages('default', sessionId, [{ role: 'assistant', content: 'Hello.' }]);
    await send({ requestId: 'r2', since: 2 });
    await until(() => results.length === 2);
    expect(results[1].request).toMatchObject({ since: 2, messages: [{ role: 'assistant', content: 'Hello.' }] });
    expect(results[1].cache).toMatchObject({ rebuilt: false, previousEnd: 2 });
    await send({ requestId: 'r3', since: 9 });
    await until(() => results.length === 3);
    expect(results[2].request.since).toBe(0);
    expect(results[2].request.messages).toHaveLength(3);
    await send({ requestId: 'r4', since: -1 });
    await until(() => letters.length === 1);
    expect(letters[0]).toMatchObject({
      [DLQ_HEADERS.reason]: 'invalid',
      [DLQ_HEADERS.error]: expect.stringMatching(/^since: /),
    });
    expect(results).toHaveLength(3);
    await sub.close();
  });
});
