/**
 * The runner's held session states (session-cache.ts): bounded by sessions and by
 * estimated bytes, least recently used first out; a held state follows this runner's
 * own writes only when it is the state the write replaced.
 */
import type { LogEntry, SessionState } from '@ctxflow/session-runner';
import { SessionCache } from '@ctxflow/session-runner';
import { describe, expect, it } from 'vitest';

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

/** An empty state's estimate (the per-state overhead) and a message's (its text plus 256). */
const EMPTY = 4_096;
const entry = (text: string) => 256 + text.length;

describe('SessionCache', () => {
  it('holds at most `sessions` sessions: the least recently used leaves first', () => {
    const cache = new SessionCache({ sessions: 2, bytes: 1e9 });
    cache.hold('a', state('a', '1'));
    cache.hold('b', state('b', '1'));
    expect(cache.get('a')?.version).toBe('1'); // a is now the most recent
    cache.hold('c', state('c', '1'));
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')?.version).toBe('1');
    expect(cache.get('c')?.version).toBe('1');
  });

  it('holds at most `bytes` estimated bytes, and never a session bigger than that', () => {
    const text = 'x'.repeat(1_000);
    const one = EMPTY + entry(text);
    const cache = new SessionCache({ sessions: 100, bytes: 2 * one });
    cache.hold('a', state('a', '1', [message(0, text)]));
    cache.hold('b', state('b', '1', [message(0, text)]));
    expect(cache.bytes).toBe(2 * one);
    cache.hold('c', state('c', '1', [message(0, text)]));
    expect(cache.get('a')).toBeUndefined();
    expect(cache.bytes).toBe(2 * one);

    cache.hold('big', state('big', '1', [message(0, 'y'.repeat(3 * one))]));
    expect(cache.get('big')).toBeUndefined();
    expect(cache.bytes).toBe(2 * one);
  });

  it('counts an extended log by its new entries; a replaced log from scratch', () => {
    const cache = new SessionCache({ sessions: 10, bytes: 1e9 });
    const first = [message(0, 'hello')];
    cache.hold('a', state('a', '1', first));
    cache.hold('a', state('a', '2', [...first, message(1, 'world!')]));
    expect(cache.bytes).toBe(EMPTY + entry('hello') + entry('world!'));
    // A rewind's shorter log (another array) is measured again.
    cache.hold('a', state('a', '3', [message(0, 'hi')]));
    expect(cache.bytes).toBe(EMPTY + entry('hi'));
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
