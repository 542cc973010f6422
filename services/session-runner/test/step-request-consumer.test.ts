import { createMemoryBus } from '@ctxflow/bus';
import { TOPICS } from '@ctxflow/contracts';
import { createEngine, MemorySessionStore, startStepRequestConsumer } from '@ctxflow/session-runner';
import { describe, expect, it } from 'vitest';

function collectResults(bus: ReturnType<typeof createMemoryBus>) {
  const results: any[] = [];
  const ready = bus.subscriber.subscribe({
    topic: TOPICS.stepResults,
    groupId: `results-${Math.random()}`,
    async handle(records) {
      for (const r of records) results.push(JSON.parse(r.value));
    },
  });
  return { results, ready };
}

async function until(check: () => boolean, ms = 5000) {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('step requests over the bus', () => {
  it('runs the context pass per request and publishes the result; a redelivered request commits nothing new', async () => {
    const bus = createMemoryBus();
    const store = new MemorySessionStore();
    const engine = createEngine({ store });
    const session = await engine.createSession('default', {});
    await engine.addContext('default', { sessionId: session.sessionId, items: [{ kind: 'notice', content: 'n1' }] });
    const { results, ready } = collectResults(bus);
    await ready;
    const sub = await startStepRequestConsumer({ engine, store, subscriber: bus.subscriber, publisher: bus.publisher });
    const request = { sessionId: session.sessionId, requestId: 'req-1', mode: 'first' };
    await bus.publisher.publish(TOPICS.stepRequests, [{ key: session.sessionId, value: JSON.stringify(request) }]);
    await bus.publisher.publish(TOPICS.stepRequests, [{ key: session.sessionId, value: JSON.stringify(request) }]);
    await until(() => results.length === 2);
    expect(results[0].ok).toBe(true);
    expect(results[0].rows.map((r: any) => r.content)).toEqual(['n1']);
    expect(results[1].stepId).toBe(results[0].stepId);
    expect(results[1].rows).toEqual(results[0].rows);
    const inspected = await engine.inspect('default', session.sessionId);
    expect(inspected.steps).toHaveLength(1);
    expect(inspected.log).toHaveLength(1);
    await sub.close();
  });

  it('answers an unknown session with a refusal record and a poison record is skipped', async () => {
    const bus = createMemoryBus();
    const store = new MemorySessionStore();
    const engine = createEngine({ store });
    const { results, ready } = collectResults(bus);
    await ready;
    const sub = await startStepRequestConsumer({ engine, store, subscriber: bus.subscriber, publisher: bus.publisher });
    await bus.publisher.publish(TOPICS.stepRequests, [
      { key: 'x', value: '{not json' },
      { key: 'x', value: JSON.stringify({ sessionId: 'ses_missing', requestId: 'r2' }) },
    ]);
    await until(() => results.length === 1);
    expect(results[0]).toEqual({
      requestId: 'r2',
      sessionId: 'ses_missing',
      ok: false,
      error: { code: 'state_session_not_found', message: 'session not found', retryable: false },
    });
    await sub.close();
  });

  it('tolerant reader: a step request with a field this version does not know is answered, not skipped', async () => {
    const bus = createMemoryBus();
    const store = new MemorySessionStore();
    const engine = createEngine({ store });
    const session = await engine.createSession('default', {});
    await engine.addContext('default', { sessionId: session.sessionId, items: [{ kind: 'notice', content: 'n1' }] });
    const { results, ready } = collectResults(bus);
    await ready;
    const sub = await startStepRequestConsumer({ engine, store, subscriber: bus.subscriber, publisher: bus.publisher });
    const request = { sessionId: session.sessionId, requestId: 'req-x', mode: 'first', priority: 'high' };
    await bus.publisher.publish(TOPICS.stepRequests, [{ key: session.sessionId, value: JSON.stringify(request) }]);
    await until(() => results.length === 1);
    expect(results[0]).toMatchObject({ requestId: 'req-x', sessionId: session.sessionId, ok: true });
    expect(results[0].rows.map((r: any) => r.content)).toEqual(['n1']);
    await sub.close();
  });
});
