import { randomUUID } from 'node:crypto';
import type { Ids } from '../ports/ids.ts';

/**
 * Ids from `crypto.randomUUID()`, which draws its random bytes in batches: the prefix,
 * '_', and the first 20 hex digits of a version 4 UUID (74 random bits: one digit is its
 * version).
 */
export const randomIds: Ids = {
  newId(prefix) {
    const uuid = randomUUID();
    return `${prefix}_${uuid.slice(0, 8)}${uuid.slice(9, 13)}${uuid.slice(14, 18)}${uuid.slice(19, 23)}`;
  },
};

/** An id source from a function (the `newId` option of createEngine). */
export function idsFrom(newId: (prefix: string) => string): Ids {
  return { newId };
}
