function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/**
 * `convert`, remembered per neutral message. The engine keeps one frozen neutral message per
 * log entry and every later request shares it, so a session's history is converted once per
 * format, not once per step. What `convert` returns is frozen (deeply) and shared by every
 * body that contains it: it must build new objects from the message's strings only.
 */
export function perMessage<M extends object, T>(convert: (message: M) => T): (message: M) => T {
  const done = new WeakMap<M, T>();
  return (message) => {
    let out = done.get(message);
    if (out === undefined) {
      out = deepFreeze(convert(message));
      done.set(message, out);
    }
    return out;
  };
}
