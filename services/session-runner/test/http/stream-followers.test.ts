/**
 * The replay a stream opens with after `Last-Event-ID`: only the events after the one named; an id
 * this process issued but no longer holds gives every held event after a count of the dropped
 * ones; an id of another process (a restart) gives every held event; and the frames carry ids.
 */
import { describe, expect, it } from 'vitest';
import type { StreamChunk } from '../../src/domain/model.ts';
import { boundedReplay, eventsAfter } from '../../src/http/stream-followers.ts';

const chunk = (seq: number): StreamChunk => ({ type: 'message', seq, role: 'user', content: `m${seq}`, at: 't' });
const held = [5, 6, 7].map((n) => ({ id: `e1-${n}`, chunk: chunk(n) }));

describe('eventsAfter and boundedReplay', () => {
  it('after a held id: the events after it; no id: all of them', () => {
    expect(eventsAfter(held, 'e1-6')).toEqual({ events: [held[2]], omitted: 0 });
    expect(eventsAfter(held, 'e1-7')).toEqual({ events: [], omitted: 0 });
    expect(eventsAfter(held, undefined)).toEqual({ events: held, omitted: 0 });
  });

  it('an id no longer held counts the dropped events; another process’s id gives all, counting none', () => {
    expect(eventsAfter(held, 'e1-2')).toEqual({ events: held, omitted: 2 });
    expect(eventsAfter(held, 'ff-40')).toEqual({ events: held, omitted: 0 });
    expect(eventsAfter(held, 'garbage')).toEqual({ events: held, omitted: 0 });
  });

  it('frames carry their ids after the data; dropped events are one replay_truncated frame first', () => {
    const frames = boundedReplay(held.slice(2), 1_000_000, 4);
    expect(frames).toEqual([
      'event: replay_truncated\ndata: {"type":"replay_truncated","omitted":4}\n\n',
      `event: message\ndata: ${JSON.stringify(chunk(7))}\nid: e1-7\n\n`,
    ]);
  });
});
