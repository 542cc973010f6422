/**
 * The generic feed's body, through its schema into the TicketUpdate: what is over-long
 * within the schema's limits is clipped, what the contract does not name is refused.
 */
import { CtxflowError, type TicketUpdate } from '@ctxflow/contracts';
import { describe, expect, it } from 'vitest';
import { normalizeGeneric } from '../../../src/domain/normalizers/generic.ts';
import { RECEIVED_AT } from '../../helpers.ts';

const EMOJI = '\u{1F600}'; // one code point, two UTF-16 units

function normalized(body: unknown): TicketUpdate {
  return (normalizeGeneric({ headers: {}, body, receivedAt: RECEIVED_AT }) as { update: TicketUpdate }).update;
}

describe('generic body', () => {
  it('a summary over 16,384 UTF-16 units within 16,384 code points is clipped, its surrogate pair cut', () => {
    const summary = EMOJI.repeat(8200);
    expect(normalized({ eventId: 'e', ticket: 't', summary })).toEqual({
      id: 'generic:e',
      source: 'generic',
      ticket: 't',
      eventId: 'e',
      kind: 'updated',
      summary: `${summary.slice(0, 16_383)}…`,
      occurredAt: RECEIVED_AT,
      receivedAt: RECEIVED_AT,
    });
  });

  it('a summary over 16,384 code points is refused', () => {
    expect(() => normalized({ eventId: 'e', ticket: 't', summary: 'a'.repeat(16_385) })).toThrow(
      expect.objectContaining({ code: 'validation_error', message: expect.stringMatching(/^body: summary: /) }),
    );
  });

  it('a JSON body with a "__proto__" key is refused like any unknown key', () => {
    const value = JSON.parse('{"eventId":"e","ticket":"t","summary":"s","__proto__":{"x":1}}');
    let refusal: unknown;
    try {
      normalized(value);
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(CtxflowError);
    expect(refusal).toMatchObject({ code: 'validation_error', message: expect.stringMatching(/^body: /) });
  });
});
