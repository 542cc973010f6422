/**
 * CTXFLOW_CONTEXT_ROW_EVENTS on the embedded default: off unless set, a bad value named; on,
 * each committed row of a step taken over HTTP is one CloudEvent on TOPICS.contextRows of the
 * app's in-process bus.
 */
import { CONTEXT_ROW_EVENT_TYPE, TOPICS } from '@ctxflow/contracts';
import { buildEmbeddedApp, loadEmbeddedConfig } from '@ctxflow/embedded';
import { ConfigError } from '@ctxflow/service-kit';
import { loadRunnerConfig } from '@ctxflow/session-runner';
import { describe, expect, it } from 'vitest';

async function stepWithTwoRows() {
  const embedded = await buildEmbeddedApp({ config: { apiKeys: new Map(), secrets: {}, contextRowEvents: true } });
  const records: { key: string; headers: Record<string, string>; value: string }[] = [];
  const subscription = await embedded.bus.subscriber.subscribe({
    topic: TOPICS.contextRows,
    groupId: 'test',
    handle: async (batch) => {
      records.push(...batch);
    },
  });
  await subscription.ready();
  const { sessionId } = (await embedded.app.inject({ method: 'POST', url: '/sessions', payload: {} })).json();
  const context = await embedded.app.inject({
    method: 'POST',
    url: '/context',
    payload: {
      sessionId,
      items: [
        { kind: 'notice', content: 'one' },
        { kind: 'instruction', content: 'two' },
      ],
    },
  });
  expect(context.json()).toEqual({ recorded: 2 });
  const step = await embedded.app.inject({ method: 'POST', url: `/sessions/${sessionId}/steps`, payload: {} });
  expect(step.statusCode).toBe(200);
  return { embedded, subscription, records, sessionId };
}

describe('context-row events in the embedded app', () => {
  it('CTXFLOW_CONTEXT_ROW_EVENTS: false by default, true or false, anything else names the variable', () => {
    expect(loadEmbeddedConfig({}).contextRowEvents).toBe(false);
    expect(loadRunnerConfig({}).contextRowEvents).toBe(false);
    expect(loadEmbeddedConfig({ CTXFLOW_CONTEXT_ROW_EVENTS: 'true' }).contextRowEvents).toBe(true);
    expect(loadRunnerConfig({ CTXFLOW_CONTEXT_ROW_EVENTS: 'false' }).contextRowEvents).toBe(false);
    expect(() => loadRunnerConfig({ CTXFLOW_CONTEXT_ROW_EVENTS: 'yes' })).toThrow(ConfigError);
    const problems = (() => {
      try {
        loadEmbeddedConfig({ CTXFLOW_CONTEXT_ROW_EVENTS: 'yes' });
        return [];
      } catch (err) {
        return (err as ConfigError).problems;
      }
    })();
    expect(problems.join('\n')).toContain('CTXFLOW_CONTEXT_ROW_EVENTS');
  });

  it('on: one CloudEvent per committed row on the in-process bus, in log order, keyed by session', async () => {
    const { embedded, subscription, records, sessionId } = await stepWithTwoRows();
    const deadline = Date.now() + 5_000;
    while (records.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    const inspect = (await embedded.app.inject({ url: `/sessions/${sessionId}/inspect` })).json();
    const rowIds = inspect.log
      .filter((e: { row?: { id: string } }) => e.row)
      .map((e: { row: { id: string } }) => e.row.id);
    expect(rowIds).toHaveLength(2);
    expect(records.map((r) => [r.key, r.headers.ce_type, r.headers.ce_id])).toEqual(
      rowIds.map((id: string) => [sessionId, CONTEXT_ROW_EVENT_TYPE, id]),
    );
    expect(records.map((r) => JSON.parse(r.value).content)).toEqual(['one', 'two']);
    await subscription.close();
    await embedded.close();
  });
});
