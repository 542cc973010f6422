/**
 * The stepContext hook: R22-R27 (every model call, the cursor, what is new,
 * limits, skips with their stream chunk and telemetry, over-size batches).
 */

import type { StepContextRequest } from '@ctxflow/session-runner';
import { ATTR_SESSION_ID, ATTR_SKIP_REASON, ATTR_STEP_ID, EVENT_CONTEXT_SKIPPED } from '@ctxflow/telemetry';
import { afterEach, describe, expect, it } from 'vitest';
import { createTestTelemetry } from '../support/telemetry.ts';
import {
  addContext,
  inspect,
  message,
  notice,
  openSession,
  rowsOf,
  type Session,
  step,
  streamChunks,
} from './support.ts';

function byteLength(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8');
}

/** What a batch row was as a hook item (the bytes the limit measures). */
function asItem(row: Record<string, unknown>) {
  return { kind: row.kind, content: row.content, source: row.source };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

describe('the stepContext hook', () => {
  it('R22: the hook runs before every model call: first attempt, retry, forced completion', async () => {
    const s = await openSession({ agent: {} });
    let n = 0;
    s.hook.script = () => ({ items: [notice(`update ${++n}`)], cursor: n });
    const modes = ['first', 'retry', 'forced_completion', 'first'];
    for (const [i, mode] of modes.entries()) {
      const answer = await step(s, s.sessionId, { mode });
      expect(s.hook.calls).toHaveLength(i + 1);
      expect(answer.rows.map((r) => r.content)).toEqual([`update ${i + 1}`]);
      expect(answer.request.messages.at(-1)!.content).toContain(`update ${i + 1}`);
    }
    expect(s.hook.calls.every((c) => c.sessionId === s.sessionId)).toBe(true);
  });

  it('R22: a restarted run and a session without an agent still call the hook', async () => {
    const s = await openSession();
    await step(s, s.sessionId);
    expect(s.hook.calls).toHaveLength(1);
    const restarted = await s.call('POST', `/sessions/${s.sessionId}/runs/restart`, {});
    expect(restarted.status).toBe(200);
    expect(s.hook.calls).toHaveLength(2);
  });

  it('R23: the cursor is stored on the rows it came with; the hook gets the cursor of the last batch in the log', async () => {
    const s = await openSession({ agent: {} });
    s.hook.script = () => ({ items: [notice('a'), notice('b')], cursor: { seq: 1 } });
    const first = await step(s, s.sessionId);
    expect(first.rows.map((r) => r.cursor)).toEqual([{ seq: 1 }, { seq: 1 }]);
    expect(first.cursor).toEqual({ seq: 1 });

    s.hook.script = () => undefined; // nothing new: no row
    await addContext(s, s.sessionId, [notice('app row without a cursor')]);
    const second = await step(s, s.sessionId);
    expect(second.rows.map((r) => r.cursor)).toEqual([undefined]);
    expect(second.cursor).toEqual({ seq: 1 });

    s.hook.script = () => ({ items: [notice('c')], cursor: { seq: 2 } });
    await step(s, s.sessionId);
    s.hook.script = () => undefined;
    await step(s, s.sessionId);
    expect(s.hook.calls.map((c) => c.cursor)).toEqual([undefined, { seq: 1 }, { seq: 1 }, { seq: 2 }]);
    const view = await inspect(s, s.sessionId);
    expect(view.cursor).toEqual({ seq: 2 });
    expect(rowsOf(view).map((r) => [r.content, r.cursor])).toEqual([
      ['a', { seq: 1 }],
      ['b', { seq: 1 }],
      ['app row without a cursor', undefined],
      ['c', { seq: 2 }],
    ]);
  });

  it('R24: handed its cursor, a hook returning only what is new since it delivers every update exactly once', async () => {
    const s = await openSession({ agent: {} });
    const feed: { seq: number; text: string }[] = [];
    s.hook.script = ({ cursor }: StepContextRequest) => {
      const since = typeof cursor === 'number' ? cursor : 0;
      const updates = feed.filter((u) => u.seq > since);
      if (updates.length === 0) return undefined;
      return { items: updates.map((u) => notice(u.text)), cursor: updates.at(-1)!.seq };
    };
    const publish = (text: string) => feed.push({ seq: feed.length + 1, text });
    publish('T1 opened');
    await step(s, s.sessionId);
    await step(s, s.sessionId);
    publish('T1 assigned');
    publish('T2 opened');
    await step(s, s.sessionId, { mode: 'retry' });
    await step(s, s.sessionId);
    publish('T1 closed');
    await step(s, s.sessionId);
    expect(rowsOf(await inspect(s, s.sessionId)).map((r) => [r.content, r.cursor])).toEqual([
      ['T1 opened', 1],
      ['T1 assigned', 3],
      ['T2 opened', 3],
      ['T1 closed', 4],
    ]);
  });

  it('R24: a hook that returns the same text each time adds a row each time', async () => {
    const s = await openSession({ agent: {} });
    s.hook.script = () => ({ items: [notice('same')] });
    await step(s, s.sessionId);
    await step(s, s.sessionId);
    expect(rowsOf(await inspect(s, s.sessionId)).map((r) => r.content)).toEqual(['same', 'same']);
  });

  it('R25: defaults: a batch limit of 32 KiB and a time limit of 5 s', async () => {
    const s = await openSession({ agent: {} });
    const agent = await s.call('GET', `/agents/${s.agentId}`);
    expect(agent.status).toBe(200);
    expect(agent.body.stepContext).toEqual({ maxBytes: 32768, timeoutMs: 5000 });
    const requests: StepContextRequest[] = [];
    // A batch of just under 32 KiB passes whole; one just over it does not.
    const content = (size: number) => 'x'.repeat(size);
    s.hook.script = (request) => {
      requests.push(request);
      return { items: [notice(content(32768 - 200))], cursor: 1 };
    };
    const fits = await step(s, s.sessionId);
    expect(requests[0]!.maxBytes).toBe(32768);
    expect(fits.rows.map((r) => r.content)).toEqual([content(32768 - 200)]);
    expect(byteLength({ items: fits.rows.map(asItem), cursor: 1 })).toBeLessThanOrEqual(32768);
    s.hook.script = () => ({ items: [notice(content(20_000)), notice(content(20_000))], cursor: 2 });
    const over = await step(s, s.sessionId);
    expect(over.rows.map((r) => r.content)).toEqual([
      content(20_000),
      expect.stringMatching(/^1 more item .*left out/),
    ]);
    expect(byteLength({ items: over.rows.map(asItem), cursor: 2 })).toBeLessThanOrEqual(32768);
  });

  it('R25: a batch with its cursor stays within maxBytes', async () => {
    const s = await openSession({ agent: { stepContext: { maxBytes: 600 } } });
    const cursor = { stream: 'tickets', id: '1700000000000-7' };
    s.hook.script = () => ({
      items: Array.from({ length: 6 }, (_, i) => notice(`Ticket ${i}: ${'y'.repeat(80)}`)),
      cursor,
    });
    const answer = await step(s, s.sessionId);
    expect(answer.rows.length).toBeGreaterThan(1);
    expect(byteLength({ items: answer.rows.map(asItem), cursor })).toBeLessThanOrEqual(600);
    expect(s.hook.calls).toHaveLength(1);
  });

  it('R25: the hook runs within timeoutMs and its abort signal fires at the limit', async () => {
    const s = await openSession({ agent: { stepContext: { timeoutMs: 50 } } });
    let signal: AbortSignal | undefined;
    let abortedAfter: number | undefined;
    const started = performance.now();
    s.hook.script = (request) => {
      signal = request.signal;
      request.signal.addEventListener('abort', () => {
        abortedAfter = performance.now() - started;
      });
      return new Promise(() => {});
    };
    const answer = await step(s, s.sessionId);
    const took = performance.now() - started;
    expect(signal?.aborted).toBe(true);
    expect(abortedAfter).toBeGreaterThanOrEqual(45);
    expect(took).toBeLessThan(2000);
    expect(answer.skipped.map((k) => k.reason)).toEqual(['hook_timeout']);
  });

  for (const [reason, what, script] of [
    [
      'hook_error',
      'throws',
      () => {
        throw new Error('feed unreachable');
      },
    ],
    ['hook_error', 'rejects', () => Promise.reject(new Error('feed unreachable'))],
    ['hook_timeout', 'never resolves within timeoutMs', () => new Promise(() => {})],
    ['hook_invalid', 'returns a string', () => 'not a result'],
    ['hook_invalid', 'returns an unknown kind', () => ({ items: [{ kind: 'shout', content: 'x' }], cursor: 9 })],
    ['hook_invalid', 'returns items that are not a list', () => ({ items: 'x', cursor: 9 })],
    ['hook_invalid', 'returns fields a result does not have', () => ({ items: [notice('x')], cursor: 9, extra: 1 })],
  ] as const) {
    it(`R26: a hook that ${what} is skipped: no row, cursor unchanged, the run goes on, a context_skipped chunk and a ${reason} report`, async () => {
      const s = await openSession({ agent: { stepContext: { timeoutMs: 50 } } });
      s.hook.script = () => ({ items: [notice('first batch')], cursor: 'c1' });
      await step(s, s.sessionId);
      const before = await inspect(s, s.sessionId);

      let signal: AbortSignal | undefined;
      s.hook.script = (request) => {
        signal = request.signal;
        return (script as () => unknown)();
      };
      await addContext(s, s.sessionId, [notice('app item still delivered')]);
      const failed = await s.call('POST', `/sessions/${s.sessionId}/steps`, {});
      expect(failed.status).toBe(200);
      expect(failed.body.rows.map((r: { source: string }) => r.source)).toEqual(['app']);
      expect(failed.body.cursor).toBe('c1');
      expect(failed.body.skipped).toEqual([{ reason, message: expect.any(String) }]);
      if (reason === 'hook_timeout') expect(signal?.aborted).toBe(true);

      const after = await inspect(s, s.sessionId);
      expect(rowsOf(after)).toEqual([...rowsOf(before), ...failed.body.rows]);
      expect(rowsOf(after).filter((r) => r.source === 'hook')).toHaveLength(1);
      expect(after.cursor).toBe('c1');

      // The run goes on, and the next call gets the same cursor.
      s.hook.script = () => undefined;
      await step(s, s.sessionId);
      expect(s.hook.calls.map((c) => c.cursor)).toEqual([undefined, 'c1', 'c1']);

      const { chunks } = await streamChunks(s, s.sessionId);
      const skippedChunks = chunks.filter((c) => c.event === 'context_skipped');
      expect(skippedChunks).toEqual([
        {
          event: 'context_skipped',
          data: {
            type: 'context_skipped',
            stepId: failed.body.stepId,
            reason,
            message: expect.any(String),
            at: expect.any(String),
          },
        },
      ]);
      expect(s.telemetry.skipped).toEqual([
        { sessionId: s.sessionId, stepId: failed.body.stepId, reason, message: failed.body.skipped[0].message },
      ]);
    });
  }

  it('R26: a hook result that arrives after the timeout is never committed', async () => {
    const s = await openSession({ agent: { stepContext: { timeoutMs: 30 } } });
    s.hook.script = () =>
      new Promise((resolve) => setTimeout(() => resolve({ items: [notice('too late')], cursor: 5 }), 120));
    const answer = await step(s, s.sessionId);
    expect(answer.skipped.map((k) => k.reason)).toEqual(['hook_timeout']);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const view = await inspect(s, s.sessionId);
    expect(rowsOf(view)).toEqual([]);
    expect(view.cursor).toBeNull();
    await step(s, s.sessionId);
    expect(s.hook.calls.map((c) => c.cursor)).toEqual([undefined, undefined]);
  });

  it('R26: the skip is logged through OpenTelemetry as a core.context.skipped event with its reason', async () => {
    const telemetry = createTestTelemetry();
    cleanups.push(() => telemetry.shutdown());
    const s: Session = await openSession({ agent: {}, engine: { telemetry: telemetry.contextTelemetry } });
    s.hook.script = () => {
      throw new Error('feed unreachable');
    };
    const answer = await step(s, s.sessionId);
    const records = (await telemetry.logRecords()).filter((r) => r.eventName === EVENT_CONTEXT_SKIPPED);
    expect(EVENT_CONTEXT_SKIPPED).toBe('core.context.skipped');
    expect(records).toHaveLength(1);
    expect(records[0]!.attributes[ATTR_SKIP_REASON]).toBe('hook_error');
    expect(records[0]!.attributes).toMatchObject({ [ATTR_SESSION_ID]: s.sessionId, [ATTR_STEP_ID]: answer.stepId });
    expect(s.telemetry.skipped).toEqual([]); // the engine reported to the OpenTelemetry path, not the recorder
  });

  it('R27: an over-size batch keeps the items that fit, in order, then one notice saying how many were left out; the cursor advances', async () => {
    const s = await openSession({ agent: { stepContext: { maxBytes: 600 } } });
    const items = Array.from({ length: 10 }, (_, i) => notice(`Ticket ${i + 1}: ${'z'.repeat(60)}`));
    s.hook.script = () => ({ items, cursor: 'c10' });
    await message(s, s.sessionId, 'user', 'Go');
    const answer = await step(s, s.sessionId);

    const kept = answer.rows.slice(0, -1);
    const last = answer.rows.at(-1)!;
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.map((r) => r.content)).toEqual(items.slice(0, kept.length).map((i) => i.content));
    const leftOut = items.length - kept.length;
    expect(last).toMatchObject({ kind: 'notice', source: 'hook', cursor: 'c10' });
    expect(last.content).toMatch(new RegExp(`^${leftOut} more items? .*left out`));
    expect(answer.rows.every((r) => r.cursor === 'c10')).toBe(true);
    // Within the limit, and no further item would have fitted.
    expect(byteLength({ items: answer.rows.map(asItem), cursor: 'c10' })).toBeLessThanOrEqual(600);
    const oneMore = [
      ...items.slice(0, kept.length + 1).map((i) => ({ ...i, source: 'hook' })),
      { ...asItem(last), content: (last.content as string).replace(String(leftOut), String(leftOut - 1)) },
    ];
    expect(byteLength({ items: oneMore, cursor: 'c10' })).toBeGreaterThan(600);

    s.hook.script = () => undefined;
    await step(s, s.sessionId);
    expect(s.hook.calls.map((c) => c.cursor)).toEqual([undefined, 'c10']);
  });

  it('R27: a single item over the limit leaves only the notice, and the cursor still advances', async () => {
    const s = await openSession({ agent: { stepContext: { maxBytes: 600 } } });
    s.hook.script = () => ({ items: [notice('w'.repeat(700))], cursor: 42 });
    const answer = await step(s, s.sessionId);
    expect(answer.rows).toHaveLength(1);
    expect(answer.rows[0]).toMatchObject({ kind: 'notice', source: 'hook', cursor: 42 });
    expect(answer.rows[0]!.content).toMatch(/^1 more item .*left out/);
    expect(answer.cursor).toBe(42);
    s.hook.script = () => undefined;
    await step(s, s.sessionId);
    expect(s.hook.calls.map((c) => c.cursor)).toEqual([undefined, 42]);
  });
});
