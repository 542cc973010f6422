/**
 * domain/log-view.ts: a view appended to is the view of its whole log made anew (R3: the renderings
 * of a log's first entries never change when it grows), and a window's view needs its fold.
 */
import { describe, expect, it } from 'vitest';
import { LogView } from '../../src/domain/log-view.ts';
import type { LogEntry } from '../../src/domain/model.ts';

const at = '2026-01-01T00:00:00.000Z';
const LOG: LogEntry[] = [
  { type: 'message', seq: 0, role: 'user', content: 'Hi "there"', at },
  {
    type: 'row',
    seq: 1,
    stepId: 's1',
    at,
    row: { id: 'r1', role: 'context', kind: 'notice', source: 'hook', content: 'é', cursor: 'c1' },
  },
  {
    type: 'row',
    seq: 2,
    stepId: 's1',
    at,
    row: { id: 'r2', role: 'context', kind: 'tools', source: 'app', disable: ['search'] },
  },
  { type: 'message', seq: 3, role: 'assistant', content: 'Hello', at },
  {
    type: 'row',
    seq: 4,
    stepId: 's2',
    at,
    row: { id: 'r3', role: 'context', kind: 'notice', source: 'hook', content: 'x', cursor: 'c2' },
  },
];

const parts = (view: LogView) => ({
  log: [...view.log],
  start: view.start,
  messages: view.messages,
  bytes: view.bytes,
  toolRows: view.toolRows,
  cursor: view.cursor,
});

describe('LogView', () => {
  it('R3: appended at every split, a view equals the view of the whole log; its sizes are those of the JSON', () => {
    const whole = LogView.of(LOG);
    expect(whole.log).toBe(LOG);
    expect(whole.cursor).toBe('c2');
    expect(whole.toolRows.map((r) => r.row.id)).toEqual(['r2']);
    for (let count = 0; count <= LOG.length; count++) {
      expect(whole.bytes[count]).toBe(Buffer.byteLength(JSON.stringify(whole.messages.slice(0, count))) - 2);
    }
    for (let k = 0; k <= LOG.length; k++) {
      expect(parts(LogView.of(LOG.slice(0, k)).append(LOG.slice(k))), `split at ${k}`).toEqual(parts(whole));
    }
  });

  it('a view of a log window starts from its fold, and refuses a window without one', () => {
    const fold = {
      at: 3,
      toolRows: LogView.of(LOG.slice(0, 3)).toolRows.slice(),
      bytes: LogView.of(LOG).bytes[3]!,
      cursor: 'c1',
    };
    const window = LogView.of(LOG.slice(3), { start: 3, fold });
    expect(window.bytes).toEqual(LogView.of(LOG).bytes.slice(3));
    expect([window.cursor, window.toolRows.map((r) => r.row.id)]).toEqual(['c2', ['r2']]);
    expect(() => LogView.of(LOG.slice(3), { start: 3 })).toThrow('the view of a log window at 3 needs its fold');
  });
});
