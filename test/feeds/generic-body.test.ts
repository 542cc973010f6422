import { CtxflowError, type TicketUpdate } from '@ctxflow/contracts';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { genericBodySchema, normalizeGeneric } from '../../services/feed-ingestor/src/normalizers/generic.ts';
import { parsePayload, toTicketUpdate } from '../../services/feed-ingestor/src/normalizers/normalizer.ts';
import { RECEIVED_AT } from './helpers.ts';

/** The generic body through the schema, then the TicketUpdate schema: the reference the one-pass parse must match. */
function throughSchemas(body: unknown): { update: TicketUpdate } {
  const input = parsePayload(genericBodySchema, body, 'body');
  return {
    update: toTicketUpdate({
      source: 'generic',
      ticket: input.ticket,
      eventId: input.eventId,
      kind: input.kind ?? 'updated',
      summary: input.summary,
      title: input.title,
      url: input.url,
      author: input.author,
      version: input.version,
      occurredAt: input.occurredAt ?? RECEIVED_AT,
      changes: input.changes,
      receivedAt: RECEIVED_AT,
    }),
  };
}

/** What a caller sees: the update as published (JSON, key order included), or the refusal's code, message and details. */
function outcome(run: () => { update: TicketUpdate } | { ignored: string }): unknown {
  try {
    return { json: JSON.stringify(run()) };
  } catch (err) {
    if (!(err instanceof CtxflowError)) throw err;
    return { code: err.code, message: err.message, details: err.details };
  }
}

const EMOJI = '\u{1F600}'; // one code point, two UTF-16 units
/** Strings at and around every limit of the body, in units and in code points. */
const edgeString = fc.constantFrom(
  ...[0, 1, 2, 32, 33, 63, 64, 65, 128, 129, 255, 256, 257, 1023, 1024, 1025, 2047, 2048, 2049, 16_383, 16_384, 16_385]
    .flatMap((n) => ['a'.repeat(n), EMOJI.repeat(Math.ceil(n / 2)), `${'b'.repeat(Math.max(0, n - 2))}${EMOJI}`])
    .concat(['é', 'OPS-42', ' ']),
);
const anyValue = fc.oneof(
  edgeString,
  fc.string({ maxLength: 8 }),
  fc.integer({ min: -3, max: 3 }),
  fc.constantFrom(0, -0, 1.5, -1, 2 ** 53 - 1, 2 ** 53, 1e21, Number.NaN, Number.POSITIVE_INFINITY),
  fc.constantFrom(null, true, false, [], {}, ['x']),
);
const dateTime = fc.oneof(
  { arbitrary: fc.constantFrom('2024-05-01T09:14:00Z', '2024-05-01T09:14:00.123+02:00'), weight: 4 },
  { arbitrary: fc.constantFrom('2024-05-01T09:14:00', '2024-05-01', 'yesterday', ''), weight: 1 },
);
const validChange = fc.record({
  field: fc.constantFrom('state', 'priority'),
  from: fc.constantFrom('open', null),
  to: fc.constantFrom('closed', null),
});
const badChange = fc.oneof(
  fc.constant({ field: '', from: null, to: null }),
  fc.constant({ field: 'state', from: 1 }),
  fc.constant({ field: 'state', from: null, to: null, extra: 1 }),
);
const changes = fc.oneof(
  { arbitrary: fc.array(validChange, { maxLength: 3 }), weight: 6 },
  { arbitrary: fc.array(fc.oneof(validChange, badChange), { minLength: 1, maxLength: 3 }), weight: 1 },
  { arbitrary: fc.constant(Array.from({ length: 101 }, () => ({ field: 'f', from: null, to: 'x' }))), weight: 1 },
);
/** Strings around one limit: max - 1, max and max + 1 UTF-16 units, ASCII or ending in a surrogate pair, or as many emoji. */
const around = (max: number) =>
  fc.constantFrom(
    ...[max - 1, max, max + 1].flatMap((n) => [
      'a'.repeat(n),
      `${'b'.repeat(n - 2)}${EMOJI}`,
      EMOJI.repeat(Math.ceil(n / 2)),
    ]),
  );
/** Mostly a usual value, often one at its limit, now and then any value. */
const field = <T>(usual: fc.Arbitrary<T>, limit?: fc.Arbitrary<string>) =>
  fc.oneof(
    { arbitrary: usual as fc.Arbitrary<unknown>, weight: 6 },
    { arbitrary: (limit ?? usual) as fc.Arbitrary<unknown>, weight: 3 },
    { arbitrary: anyValue as fc.Arbitrary<unknown>, weight: 1 },
  );
const fields = {
  eventId: field(fc.constantFrom('evt-1', 'é'), around(256)),
  ticket: field(fc.constantFrom('OPS-42', `${EMOJI}`), around(256)),
  summary: field(fc.constantFrom('moved to In Progress', ''), around(16_384)),
  kind: field(fc.constantFrom('status', 'x'), around(64)),
  title: field(fc.constantFrom('Checkout fails', ''), around(1024)),
  url: field(fc.constant('https://tickets.example.com/OPS-42'), around(2048)),
  author: field(fc.constant('alice'), around(256)),
  version: field(fc.oneof(fc.nat(), fc.constantFrom(0, -0, 2 ** 53 - 1))),
  occurredAt: field(dateTime),
  changes: field(changes),
};
/** A body: the three required fields mostly there, the others now and then, rarely a key the contract does not have. */
const body = fc.oneof(
  { arbitrary: fc.record(fields, { requiredKeys: ['eventId', 'ticket', 'summary'] }), weight: 6 },
  { arbitrary: fc.record(fields, { requiredKeys: [] }), weight: 1 },
  {
    arbitrary: fc.record({ ...fields, severity: anyValue }, { requiredKeys: ['eventId', 'ticket', 'summary'] }),
    weight: 1,
  },
);

describe('generic body: one parse into the TicketUpdate', () => {
  it('gives the update, or the refusal, that the body schema then the TicketUpdate schema give', () => {
    fc.assert(
      fc.property(fc.oneof({ arbitrary: body, weight: 9 }, { arbitrary: anyValue, weight: 1 }), (value) => {
        expect(outcome(() => normalizeGeneric({ headers: {}, body: value, receivedAt: RECEIVED_AT }))).toEqual(
          outcome(() => throughSchemas(value)),
        );
      }),
      { numRuns: 3000 },
    );
  });

  it('a summary over 16,384 UTF-16 units within 16,384 code points is clipped as before, its surrogate pair cut', () => {
    const summary = EMOJI.repeat(8200);
    const update = (
      normalizeGeneric({ headers: {}, body: { eventId: 'e', ticket: 't', summary }, receivedAt: RECEIVED_AT }) as {
        update: TicketUpdate;
      }
    ).update;
    expect(update.summary).toBe(`${summary.slice(0, 16_383)}…`);
    expect(update).toEqual(throughSchemas({ eventId: 'e', ticket: 't', summary }).update);
  });

  it('a JSON body with a "__proto__" key is refused like any unknown key', () => {
    const value = JSON.parse('{"eventId":"e","ticket":"t","summary":"s","__proto__":{"x":1}}');
    expect(outcome(() => normalizeGeneric({ headers: {}, body: value, receivedAt: RECEIVED_AT }))).toEqual({
      code: 'validation_error',
      message: expect.stringMatching(/^body: /),
      details: expect.any(Array),
    });
  });
});
