/**
 * The runner's held session states (session-cache.ts): bounded by sessions and by
 * estimated heap bytes; a session not held takes only the room left (held sessions unused
 * for a while make way), a held one that grows pushes out the least recently used; a held state follows this
 * runner's own writes only when it is the state the write replaced. The estimate is
 * checked against the live heap: many sessions held, garbage collected, and the heap
 * they keep measured with `v8.getHeapStatistics()`.
 */
import v8 from 'node:v8';
import type { LogEntry, SessionState } from '@ctxflow/session-runner';
import { describe, expect, it, vi } from 'vitest';
import { SessionCache } from '../../src/adapters/session-cache.ts';
import { LogView } from '../../src/domain/log-view.ts';

const message = (seq: number, content: string): LogEntry => ({
  type: 'message',
  seq,
  role: 'user',
  content,
  at: '2026-01-01T00:00:00.000Z',
});

function state(sessionId: string, version: string, log: LogEntry[] = []): SessionState {
  return {
    meta: {
      sessionId,
      tenant: 'acme',
      createdAt: '2026-01-01T00:00:00.000Z',
      thread: { live: [] },
      forceRefresh: false,
      steps: 0,
    },
    log,
    queue: [],
    calls: [],
    sites: [],
    itemSeq: 0,
    requestIds: [],
    version,
  };
}

/** The estimate of one state, held alone in a cache of its own. */
function measured(held: SessionState): number {
  const cache = new SessionCache({ sessions: 1, bytes: 1e12 });
  cache.hold(held.meta.sessionId, held);
  return cache.bytes;
}

describe('SessionCache', () => {
  it('holds at most `sessions` sessions: a session not held waits for room, held ones stay', () => {
    const cache = new SessionCache({ sessions: 2, bytes: 1e9 });
    cache.hold('a', state('a', '1'));
    cache.hold('b', state('b', '1'));
    cache.hold('c', state('c', '1'));
    expect(cache.get('c')).toBeUndefined();
    expect(cache.get('a')?.version).toBe('1');
    expect(cache.get('b')?.version).toBe('1');
    // A held session is replaced whatever the room.
    cache.hold('b', state('b', '2'));
    expect(cache.get('b')?.version).toBe('2');
    cache.drop('a');
    cache.hold('c', state('c', '1'));
    expect(cache.get('c')?.version).toBe('1');
  });

  it('holds at most `bytes` estimated bytes, and never a session bigger than that', () => {
    const text = 'x'.repeat(1_000);
    const one = measured(state('a', '1', [message(0, text)]));
    const cache = new SessionCache({ sessions: 100, bytes: 2 * one });
    cache.hold('a', state('a', '1', [message(0, text)]));
    cache.hold('b', state('b', '1', [message(0, text)]));
    expect(cache.bytes).toBe(2 * one);
    cache.hold('c', state('c', '1', [message(0, text)]));
    expect(cache.get('c')).toBeUndefined();
    expect(cache.get('a')?.version).toBe('1');
    expect(cache.bytes).toBe(2 * one);

    cache.hold('big', state('big', '1', [message(0, 'y'.repeat(3 * one))]));
    expect(cache.get('big')).toBeUndefined();
    expect(cache.bytes).toBe(2 * one);
    // A session that grows past the budget is dropped, not kept at its old size.
    cache.hold('b', state('b', '2', [message(0, 'y'.repeat(3 * one))]));
    expect(cache.get('b')).toBeUndefined();
    expect(cache.bytes).toBe(one);
  });

  it('a held session that grows pushes out the least recently used', () => {
    const text = 'x'.repeat(1_000);
    const one = measured(state('a', '1', [message(0, text)]));
    const grown = state('a', '2', [message(0, text), message(1, text)]);
    const cache = new SessionCache({ sessions: 100, bytes: one + measured(grown) });
    cache.hold('a', state('a', '1', [message(0, text)]));
    cache.hold('b', state('b', '1', [message(0, text)]));
    cache.hold('c', state('c', '1', [message(0, text)]));
    expect(cache.get('b')?.version).toBe('1');
    expect(cache.get('a')?.version).toBe('1'); // c is now the least recently used
    cache.hold('a', grown);
    expect(cache.get('c')).toBeUndefined();
    expect(cache.get('b')?.version).toBe('1');
    expect(cache.get('a')?.version).toBe('2');
    expect(cache.bytes).toBe(one + measured(grown));
  });

  it('sessions used in turn, more than the budget holds: the held ones stay held and are used', () => {
    const text = 'x'.repeat(1_000);
    const one = measured(state('a', '1', [message(0, text)]));
    const cache = new SessionCache({ sessions: 100, bytes: 2 * one });
    const reads: string[] = [];
    // Three rounds of a step on a, b and c in turn: a step uses the held state or reads and holds it.
    for (let round = 0; round < 3; round++) {
      for (const id of ['a', 'b', 'c']) {
        const held = cache.get(id);
        if (held === undefined) reads.push(id);
        cache.hold(id, { ...(held ?? state(id, '1', [message(0, text)])), version: String(round + 2) });
      }
    }
    expect(reads).toEqual(['a', 'b', 'c', 'c', 'c']);
    expect(cache.get('a')?.version).toBe('4');
    expect(cache.get('b')?.version).toBe('4');
    expect(cache.get('c')).toBeUndefined();
  });

  it('a session refused for want of room is not measured again until it fits', () => {
    const text = 'x'.repeat(1_000);
    const one = measured(state('a', '1', [message(0, text)]));
    const cache = new SessionCache({ sessions: 100, bytes: 3 * one - 1 });
    cache.hold('a', state('a', '1', [message(0, text)]));
    cache.hold('b', state('b', '1', [message(0, text)]));
    // Room for less than one more. Entries that count how often the cache turns them into JSON (its measure).
    let measures = 0;
    const counted = (seq: number): LogEntry => {
      const toJSON = () => {
        measures += 1;
        return message(seq, text);
      };
      return { ...message(seq, text), toJSON } as unknown as LogEntry;
    };
    const log = [counted(0)];
    cache.hold('c', state('c', '1', log));
    expect(measures).toBe(1);
    expect(cache.get('c')).toBeUndefined();
    // Its log extended: still no room for what it took, so it is not measured.
    cache.hold('c', state('c', '2', [...log, counted(1)]));
    cache.hold('c', state('c', '3', [...log, counted(1), counted(2)]));
    expect(measures).toBe(1);
    expect(cache.get('c')).toBeUndefined();
    // Room again: measured and held.
    cache.drop('a');
    cache.hold('c', state('c', '4', log));
    expect(measures).toBe(2);
    expect(cache.get('c')?.version).toBe('4');
    expect(cache.bytes).toBe(2 * one);
  });

  it('held sessions unused for `idleMs` make way for a session not held', async () => {
    const cache = new SessionCache({ sessions: 2, bytes: 1e9, idleMs: 5 });
    cache.hold('a', state('a', '1'));
    cache.hold('b', state('b', '1'));
    await new Promise((resolve) => setTimeout(resolve, 25));
    cache.hold('c', state('c', '1'));
    expect(cache.get('c')?.version).toBe('1');
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('b')).toBeUndefined();
    expect(cache.bytes).toBe(measured(state('c', '1')));
  });

  it('reads its idle clock once a second: a session stepped every 2 ms arms one timer in 200 ms', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    try {
      const cache = new SessionCache({ sessions: 2, bytes: 1e9 });
      const armed = vi.spyOn(globalThis, 'setTimeout');
      for (let i = 0; i < 100; i++) {
        cache.hold('a', state('a', String(i)));
        expect(cache.get('a')?.version).toBe(String(i));
        vi.advanceTimersByTime(2);
      }
      expect(armed).toHaveBeenCalledTimes(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a message costs its JSON plus 256 bytes; a two-byte string twice its length', () => {
    const empty = measured(state('a', '1'));
    const entry = message(0, 'hello');
    expect(measured(state('a', '1', [entry])) - empty).toBe(256 + JSON.stringify(entry).length);
    const wide = message(0, 'héllo \u{1F600}');
    expect(measured(state('a', '1', [wide])) - empty).toBe(256 + 2 * JSON.stringify(wide).length);
  });

  it("counts a step's meta by the fields it changed as its whole JSON would count", () => {
    const first = state('a', '1');
    first.meta.prefix = { system: 'You are the support desk agent of Example Corp. '.repeat(40), agentContext: [] };
    expect(measured(first)).toBe(2_048 + JSON.stringify(first.meta).length);
    const cache = new SessionCache({ sessions: 10, bytes: 1e9 });
    cache.hold('a', first);
    // A step inside a run: the same prefix object, new counters.
    const next = { ...first, meta: { ...first.meta, steps: 1, lastStepAt: 1_796_558_762_692, lastRequestEnd: 3 } };
    cache.hold('a', { ...next, version: '2' });
    expect(cache.bytes).toBe(2_048 + JSON.stringify(next.meta).length);
    // Another prefix is measured again.
    const rebuilt = { ...next, meta: { ...next.meta, prefix: { system: 'Another prompt', agentContext: [] } } };
    cache.hold('a', { ...rebuilt, version: '3' });
    expect(cache.bytes).toBe(2_048 + JSON.stringify(rebuilt.meta).length);
  });

  it('counts an extended log by its new entries as the whole log would count; a replaced log from scratch', () => {
    const cache = new SessionCache({ sessions: 10, bytes: 1e9 });
    const first = [message(0, 'hello')];
    cache.hold('a', state('a', '1', first));
    cache.hold('a', state('a', '2', [...first, message(1, 'world!')]));
    expect(cache.bytes).toBe(measured(state('a', '2', [message(0, 'hello'), message(1, 'world!')])));
    // A rewind's shorter log (another array) is measured again.
    cache.hold('a', state('a', '3', [message(0, 'hi')]));
    expect(cache.bytes).toBe(measured(state('a', '3', [message(0, 'hi')])));
    cache.drop('a');
    expect(cache.bytes).toBe(0);
  });

  it("follows this runner's write only from the state it replaced; otherwise forgets the session", () => {
    const cache = new SessionCache({ sessions: 10, bytes: 1e9 });
    cache.hold('a', state('a', 'v1'));
    cache.follow('a', { previous: 'v1', version: 'v2' }, (held) => ({ ...held, log: [message(0, 'one')] }));
    expect(cache.get('a')?.version).toBe('v2');
    expect(cache.get('a')?.log).toEqual([message(0, 'one')]);

    // Another write came between: v3 replaced something this cache never saw.
    cache.follow('a', { previous: 'v9', version: 'v3' }, (held) => held);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.bytes).toBe(0);
    // Nothing held: a write is not followed.
    cache.follow('a', { previous: 'v3', version: 'v4' }, (held) => held);
    expect(cache.get('a')).toBeUndefined();
  });

  it('holds nothing with sessions 0', () => {
    const cache = new SessionCache({ sessions: 0, bytes: 1e9 });
    cache.hold('a', state('a', '1'));
    expect(cache.get('a')).toBeUndefined();
  });
});

/**
 * A session as a store read gives it (every object and string its own, from JSON):
 * a system prompt, then `turns` of a user message, a context row and an assistant
 * message with a tool call, each of `length` characters of `fill`.
 */
function sessionJson(n: number, prompt: number, turns: number, length: number, fill: string): string {
  const text = (i: number) => `${n}.${i} `.padEnd(length, fill);
  const at = '2026-01-01T00:00:00.000Z';
  const log: unknown[] = [];
  const calls: unknown[] = [];
  const requestIds: string[] = [];
  for (let t = 0; t < turns; t++) {
    const seq = 3 * t;
    log.push({ type: 'message', seq, role: 'user', content: text(seq), at });
    log.push({
      type: 'row',
      seq: seq + 1,
      row: { id: `row_${n}_${t}`, role: 'context', kind: 'notice', source: 'app', content: text(seq + 1) },
      stepId: `stp_${n}_${t}`,
      itemId: `itm_${t}`,
      at,
    });
    log.push({
      type: 'message',
      seq: seq + 2,
      role: 'assistant',
      content: text(seq + 2),
      toolCalls: [{ callId: `call_${t}`, name: 'search' }],
      at,
    });
    calls.push({ callId: `call_${t}`, name: 'search', stepIndex: t, status: 'executed' });
    requestIds.push(`req_${n}_${t}_0123456789abcdef`);
  }
  const system = `${n} `.padEnd(prompt, 'You answer support tickets. ');
  const meta = {
    sessionId: `ses_${n}`,
    tenant: 'acme',
    agentId: 'agt_1',
    createdAt: at,
    thread: { live: [{ content: system.slice(0, prompt / 2) }] },
    forceRefresh: false,
    steps: turns,
    run: { runId: `run_${n}`, agentContext: [{ content: system }], startLength: 0, startOrdinal: 0, open: true },
    prefix: { system, agentContext: [{ content: system }] },
    lastStepAt: 1,
    lastRequestEnd: 3 * turns,
  };
  return JSON.stringify({ meta, log, queue: [], calls, sites: [], itemSeq: turns, requestIds, version: `v${n}` });
}

/** [prompt characters, turns, characters an entry, fill]: the shapes of sessions a runner holds. */
const SHAPES: [number, number, number, string][] = [
  [20_000, 1, 40, 'short '], // a long prompt, little else
  [2_000, 100, 30, 'many short entries '],
  [1_000, 5, 8_000, 'long texts '],
  [2_000, 20, 300, 'привет мир \u{1F600} '], // two-byte strings
];

describe('SessionCache on the live heap', () => {
  it('sessions held past the byte bound keep the live heap within 1.25x of it', () => {
    const gc = (globalThis as { gc?: () => void }).gc;
    if (gc === undefined) throw new Error('run with --expose-gc (vitest.config.ts execArgv)');
    const bound = 16 * 1024 * 1024;
    const collect = () => {
      gc();
      gc();
      return v8.getHeapStatistics().used_heap_size;
    };
    const cache = new SessionCache({ sessions: 100_000, bytes: bound });
    const before = collect();
    let offered = 0;
    for (let n = 0; offered < 4 * bound; n++) {
      const [prompt, turns, length, fill] = SHAPES[n % SHAPES.length]!;
      const json = sessionJson(n, prompt, turns, length, fill);
      offered += json.length;
      const held = JSON.parse(json) as SessionState;
      // As after a step: the log's view (its rendered messages) is held beside it.
      cache.hold(held.meta.sessionId, held, LogView.of(held.log));
    }
    const retained = collect() - before;
    expect(cache.bytes).toBeLessThanOrEqual(bound);
    expect(cache.bytes).toBeGreaterThan(0.9 * bound);
    expect(retained).toBeLessThanOrEqual(1.25 * bound);
    // Honest both ways: the estimate does not hold far less than the bound allows.
    expect(retained).toBeGreaterThan(0.5 * bound);
  });
});
