/**
 * `POST /context`'s body check: a body of the plain accepted shape is taken without zod,
 * anything else goes through zod. Either way the answer must be zod's: the same body out,
 * or the same refusal (code, message and details).
 */
import { CtxflowError } from '@ctxflow/contracts';
import { describe, expect, it } from 'vitest';
import { parseBody, parseContextBody, postContextBody } from '../../services/session-runner/src/http/schemas.ts';

function outcome(parse: () => unknown): unknown {
  try {
    return { body: parse() };
  } catch (error) {
    if (!(error instanceof CtxflowError)) throw error;
    return { code: error.code, message: error.message, details: error.details };
  }
}

const item = { kind: 'notice', content: 'Ticket 42 was closed.' };
const items = (n: number) => Array.from({ length: n }, () => item);

const bodies: [string, unknown][] = [
  ['items', { sessionId: 's', items: [item] }],
  ['items and a key', { sessionId: 's', items: [item], key: 'k' }],
  ['properties in another order', { key: 'k', items: [item], sessionId: 's' }],
  ['1,000 items and a 256-character key', { sessionId: 's', items: items(1000), key: 'k'.repeat(256) }],
  ['items of any value (the engine judges them)', { sessionId: 's', items: [1, 'x', null, [], {}] }],
  ['1,001 items', { sessionId: 's', items: items(1001) }],
  ['no items', { sessionId: 's', items: [] }],
  ['items not an array', { sessionId: 's', items: item }],
  ['items missing', { sessionId: 's' }],
  ['an empty sessionId', { sessionId: '', items: [item] }],
  ['a numeric sessionId', { sessionId: 42, items: [item] }],
  ['sessionId missing', { items: [item], key: 'k' }],
  ['an empty key', { sessionId: 's', items: [item], key: '' }],
  ['a 257-character key', { sessionId: 's', items: [item], key: 'k'.repeat(257) }],
  ['a null key', { sessionId: 's', items: [item], key: null }],
  ['a numeric key', { sessionId: 's', items: [item], key: 7 }],
  ['an undefined key', { sessionId: 's', items: [item], key: undefined }],
  ['another property', { sessionId: 's', items: [item], key: 'k', extra: true }],
  ['another property instead of the key', { sessionId: 's', items: [item], origin: 'tool' }],
  ['a body without a prototype', Object.assign(Object.create(null), { sessionId: 's', items: [item] })],
  ['an empty object', {}],
  ['an array', [{ sessionId: 's', items: [item] }]],
  ['a string', 'sessionId=s'],
  ['null', null],
  ['no body', undefined],
];

describe('parseContextBody', () => {
  it.each(bodies)('%s: answers as zod does', (_what, body) => {
    expect(outcome(() => parseContextBody(body))).toEqual(outcome(() => parseBody(postContextBody, body)));
  });

  it('takes a plain body without copying its items', () => {
    const body = { sessionId: 's', items: [item], key: 'k' };
    expect(parseContextBody(body).items).toBe(body.items);
  });
});
