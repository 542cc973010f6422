import type { MessageMemo } from '../domain/provider-formats/message-memo.ts';

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/**
 * A format's conversion remembered per neutral message (domain/provider-formats/message-memo.ts),
 * in a WeakMap keyed by the message: the engine keeps one frozen neutral message per log entry, so
 * an entry is converted once per format while any request holds it, and forgotten with it. What is
 * kept is frozen (deeply) and shared by every body that contains it.
 */
export const weakMessageMemo: MessageMemo = <M extends object, T>(convert: (message: M) => T) => {
  const done = new WeakMap<M, T>();
  return (message: M): T => {
    let out = done.get(message);
    if (out === undefined) {
      out = deepFreeze(convert(message));
      done.set(message, out);
    }
    return out;
  };
};
