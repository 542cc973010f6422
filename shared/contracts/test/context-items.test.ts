import { CtxflowError, validateItems } from '@ctxflow/contracts';
import { describe, expect, it } from 'vitest';

const notice = {
  kind: 'notice',
  content: 'Ticket 42 changed',
  ticketUpdates: [{ source: 'zendesk', eventId: 'evt-1' }],
};

describe('validateItems: the ticket updates a notice names', () => {
  it("a stepContext hook's notice keeps the ticket updates it names, in order", () => {
    const items = validateItems(
      [{ ...notice, ticketUpdates: [...notice.ticketUpdates, { source: 'zendesk', eventId: 'evt-2' }] }],
      'step-context',
    );
    expect(items).toEqual([
      {
        kind: 'notice',
        content: 'Ticket 42 changed',
        source: 'hook',
        ticketUpdates: [
          { source: 'zendesk', eventId: 'evt-1' },
          { source: 'zendesk', eventId: 'evt-2' },
        ],
      },
    ]);
    expect(validateItems([{ kind: 'notice', content: 'no ids' }], 'step-context')).toEqual([
      { kind: 'notice', content: 'no ids', source: 'hook' },
    ]);
  });

  it.each(['app', 'tool', 'hook'] as const)('an item of origin %s naming ticket updates is refused', (origin) => {
    const refused = (() => {
      try {
        validateItems([notice], origin);
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(refused).toBeInstanceOf(CtxflowError);
    expect((refused as CtxflowError).code).toBe('validation_error');
    expect((refused as CtxflowError).message).toBe(
      'items[0]: item: 1 unknown property (this object takes only the properties it declares)',
    );
  });

  it('a ticket update without an event id, or naming no feed source, is refused', () => {
    for (const ticketUpdates of [[{ source: 'zendesk', eventId: '' }], [{ source: 'Not A Feed!', eventId: 'e' }]]) {
      expect(() => validateItems([{ ...notice, ticketUpdates }], 'step-context')).toThrow(CtxflowError);
    }
  });
});
