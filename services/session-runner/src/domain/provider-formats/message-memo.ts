/**
 * How a format converts the neutral messages of a request: `memo(convert)` gives the conversion it
 * calls on every message. `convertEachTime` (pure) converts every message of every request; a memo
 * (adapters/weak-message-memo.ts) converts each neutral message once per format. The engine keeps one
 * frozen neutral message per log entry and every later request shares it, so with a memo a
 * session's history is converted once per format, not once per step. A converted value may then be
 * shared by every body that contains it: the formats never change one in place (they copy to mark).
 */
export type MessageMemo = <M extends object, T>(convert: (message: M) => T) => (message: M) => T;

/** No memo: each message converted on every request. */
export const convertEachTime: MessageMemo = (convert) => convert;
