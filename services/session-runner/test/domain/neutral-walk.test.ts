/**
 * The neutral messages of a log that extends one rendered before (a step's log: the held log and
 * its new entries, a LogView appended to) walk the new entries only, and equal the messages of the
 * whole log walked anew.
 */
import { describe, expect, it } from 'vitest';
import { LogView } from '../../src/domain/log-view.ts';
import type { LogEntry } from '../../src/domain/model.ts';
import { NeutralWalk, neutralMessages } from '../../src/domain/neutral-request.ts';

const at = '2026-01-01T00:00:00.000Z';
let seq = 0;
const user = (content: string): LogEntry => ({ type: 'message', seq: seq++, role: 'user', content, at });
const assistant = (content: string, calls: string[] = []): LogEntry => ({
  type: 'message',
  seq: seq++,
  role: 'assistant',
  content,
  at,
  ...(calls.length === 0 ? {} : { toolCalls: calls.map((callId) => ({ callId, name: 'search', arguments: '{}' })) }),
});
const result = (callId: string): LogEntry => ({
  type: 'message',
  seq: seq++,
  role: 'tool',
  content: callId,
  callId,
  at,
});
const row = (id: string): LogEntry => ({
  type: 'row',
  seq: seq++,
  stepId: 'stp',
  at,
  row: { id, role: 'context', kind: 'notice', source: 'app', content: id },
});

/** A log with turns whose results come out of call order, rows, a result without its call. */
const LOG: LogEntry[] = [
  user('Hi'),
  row('r1'),
  assistant('', ['a', 'b', 'c']),
  result('c'),
  result('a'),
  result('b'),
  row('r2'),
  assistant('Done.'),
  user('More'),
  assistant('', ['d', 'e']),
  result('e'),
  result('d'),
  result('zz'),
  user('Bye'),
];

describe('the neutral messages of a log extended', () => {
  it('R3: for every split, the log walked from its first part equals the log walked whole (results in call order)', () => {
    const whole = neutralMessages('sys', LOG.slice());
    expect(whole.filter((m) => m.role === 'tool').map((m) => m.content)).toEqual(['a', 'b', 'c', 'd', 'e', 'zz']);
    for (let k = 0; k <= LOG.length; k++) {
      const walked = NeutralWalk.of(LOG.slice(0, k)).extend(LOG.slice(k));
      expect(walked.messages('sys'), `split at ${k}`).toEqual(whole);
      // A view appended to after its walk was made, and before.
      const base = LogView.of(LOG.slice(0, k));
      expect(base.append(LOG.slice(k)).neutralMessages('sys'), `view split at ${k}, base not walked`).toEqual(whole);
      base.neutral();
      expect(base.append(LOG.slice(k)).neutralMessages('sys'), `view split at ${k}`).toEqual(whole);
    }
  });

  it('R3: a log that extends a rendered one reads only its new entries', () => {
    const base = NeutralWalk.of(LOG.slice(0, 10));
    const read = new Set<number>();
    const added = new Proxy(LOG.slice(10), {
      get(target, key, receiver) {
        if (typeof key === 'string' && /^\d+$/.test(key)) read.add(Number(key));
        return Reflect.get(target, key, receiver);
      },
    });
    expect(base.extend(added).messages('')).toEqual(neutralMessages('', LOG.slice()));
    expect([...read].sort((a, b) => a - b).map((i) => 10 + i)).toEqual([10, 11, 12, 13]);
  });

  it('R3: a log that does not extend a rendered one (a rewind made other entries) has a view of its own', () => {
    const base = LogView.of(LOG.slice(0, 6));
    base.neutral();
    const other = [...LOG.slice(0, 5), user('instead'), user('after')];
    const view = LogView.of(other);
    expect(view.neutralMessages('')).toEqual(neutralMessages('', other.slice()));
    expect(
      view
        .neutralMessages('')
        .map((m) => m.content)
        .slice(-2),
    ).toEqual(['instead', 'after']);
  });
});
