/**
 * `POST /context`'s body (R14: an invalid body is refused with validation_error,
 * naming where): `{ sessionId, items, key? }`, a non-empty sessionId, 1 to 1,000 items
 * of any value (the engine judges each item, R9), a key of 1 to 256 characters, no
 * other property.
 */
import { CtxflowError } from '@ctxflow/contracts';
import { validatorCompiler } from '@ctxflow/service-kit';
import type { FastifyRouteSchemaDef } from 'fastify/types/schema.js';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { postContextBody } from '../../src/http/schemas.ts';

/** The body as the route's validator takes it: its value, or the refusal it answers with. */
const validate = validatorCompiler({
  schema: postContextBody,
  method: 'POST',
  url: '/context',
  httpPart: 'body',
} as FastifyRouteSchemaDef<z.ZodType>);

function parseBody(_schema: typeof postContextBody, body: unknown): unknown {
  const result = validate(body) as { value?: unknown; error?: Error };
  if (result.error) throw result.error;
  return result.value;
}

const item = { kind: 'notice', content: 'Ticket 42 was closed.' };
const items = (n: number) => Array.from({ length: n }, () => item);

const accepted: [string, unknown][] = [
  ['items', { sessionId: 's', items: [item] }],
  ['items and a key', { sessionId: 's', items: [item], key: 'k' }],
  ['properties in another order', { key: 'k', items: [item], sessionId: 's' }],
  ['1,000 items and a 256-character key', { sessionId: 's', items: items(1000), key: 'k'.repeat(256) }],
  ['items of any value (the engine judges them)', { sessionId: 's', items: [1, 'x', null, [], {}] }],
];

/** A body refused, and the paths its refusal names. */
const refused: [string, unknown, (string | number)[][]][] = [
  ['1,001 items', { sessionId: 's', items: items(1001) }, [['items']]],
  ['no items', { sessionId: 's', items: [] }, [['items']]],
  ['items not an array', { sessionId: 's', items: item }, [['items']]],
  ['items missing', { sessionId: 's' }, [['items']]],
  ['an empty sessionId', { sessionId: '', items: [item] }, [['sessionId']]],
  ['a numeric sessionId', { sessionId: 42, items: [item] }, [['sessionId']]],
  ['sessionId missing', { items: [item], key: 'k' }, [['sessionId']]],
  ['an empty key', { sessionId: 's', items: [item], key: '' }, [['key']]],
  ['a 257-character key', { sessionId: 's', items: [item], key: 'k'.repeat(257) }, [['key']]],
  ['a null key', { sessionId: 's', items: [item], key: null }, [['key']]],
  ['a numeric key', { sessionId: 's', items: [item], key: 7 }, [['key']]],
  ['another property', { sessionId: 's', items: [item], key: 'k', extra: true }, [[]]],
  ['another property instead of the key', { sessionId: 's', items: [item], origin: 'tool' }, [[]]],
  ['an empty object', {}, [['sessionId'], ['items']]],
  ['an array', [{ sessionId: 's', items: [item] }], [[]]],
  ['a string', 'sessionId=s', [[]]],
  ['null', null, [[]]],
  ['no body', undefined, [[]]],
];

function refusal(body: unknown): CtxflowError {
  try {
    parseBody(postContextBody, body);
  } catch (error) {
    if (error instanceof CtxflowError) return error;
    throw error;
  }
  throw new Error('accepted');
}

describe('POST /context body', () => {
  it.each(accepted)('R14: accepts %s as it is', (_what, body) => {
    expect(parseBody(postContextBody, body)).toEqual(body);
  });

  it('R14: accepts an undefined key and a body without a prototype', () => {
    expect(parseBody(postContextBody, { sessionId: 's', items: [item], key: undefined })).toEqual({
      sessionId: 's',
      items: [item],
    });
    const bare = Object.assign(Object.create(null), { sessionId: 's', items: [item] });
    expect(parseBody(postContextBody, bare)).toEqual({ sessionId: 's', items: [item] });
  });

  it.each(refused)('R14: refuses %s with validation_error naming where', (_what, body, paths) => {
    const error = refusal(body);
    expect(error.code).toBe('validation_error');
    expect((error.details as { path: unknown[] }[]).map((d) => d.path)).toEqual(paths);
    expect(error.message).toMatch(paths[0]!.length ? new RegExp(`^${paths[0]!.join('.')}: `) : /^body: /);
  });
});
